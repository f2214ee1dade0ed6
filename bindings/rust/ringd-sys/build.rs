//! build.rs of ringd-sys: finds libring, tells cargo how to link it, and checks
//! the hand-written declarations of src/ffi.rs (and src/cuda.rs) against ring.h.
//!
//! Where libring comes from, first match wins:
//!   1. RINGD_LIB_DIR (a directory with libring.a or libring.so; headers from
//!      RINGD_INCLUDE_DIR, else the source tree around this crate, else
//!      RINGD_LIB_DIR/../include);
//!   2. the ringd source tree this crate sits in, once built (build/lib);
//!   3. `pkg-config --libs libring` (an installed libring).
//!
//! The tree comes before pkg-config so that the tree's own tests never link a
//! stale installed libring; a crate fetched as a git dependency has no built
//! tree beside it and takes pkg-config's.
//!
//! A directory with libring.a is linked statically: the test binaries and
//! examples then run without LD_LIBRARY_PATH or an rpath that every dependent
//! crate would need a build script of its own to set (cargo passes link-args
//! only to the crate that prints them).  libring.a's own dependencies come from
//! the Libs.private line of the libring.pc beside it (-lm, and -lcudart in a
//! CUDA build).  Run-time library directories (-Wl,-rpath, or the directory of a
//! libring.so) are exported as DEP_RING_RPATH for ringd's build script.
//!
//! The check: a C file that includes ring.h and declares every function of
//! ffi.rs again, spelled as the Rust side assumes, must compile (a C
//! redeclaration with another type is an error); a C program prints the
//! header's constants and struct ring_options' layout for `const` assertions;
//! the functions, enumerators and macros of ring.h that ffi.rs lacks are listed
//! for the crate's test.
use std::collections::{BTreeSet, HashMap};
use std::env;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// How to reach libring's headers, and what the build learned about it.
struct Libring {
    include: Vec<PathBuf>,
    cuda: bool,
}

/// One `pub fn` of ffi.rs.
struct FnDecl {
    name: String,
    params: Vec<String>,
    ret: Option<String>,
}

/// The items of ffi.rs (and cuda.rs) that the check needs.
#[derive(Default)]
struct Decls {
    fns: Vec<FnDecl>,
    consts: Vec<(String, String)>,
    aliases: HashMap<String, String>,
    option_fields: Vec<(String, String)>,
}

fn main() {
    for var in ["RINGD_LIB_DIR", "RINGD_INCLUDE_DIR", "PKG_CONFIG_PATH", "CC"] {
        println!("cargo:rerun-if-env-changed={}", var);
    }
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/ffi.rs");
    println!("cargo:rerun-if-changed=src/cuda.rs");

    let lib = locate();
    let decls = parse_sources(&["src/ffi.rs", "src/cuda.rs"]);
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    check_prototypes(&lib, &decls, &out);
    write_facts(&lib, &decls, &out);
}

// ---------------------------------------------------------------------------
// Finding and linking libring
// ---------------------------------------------------------------------------

fn locate() -> Libring {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    // bindings/rust/ringd-sys -> the tree's root, when this crate is in one.
    let root = manifest.join("../../..");
    let tree = if root.join("libring/ring.h").is_file() {
        Some(root)
    } else {
        None
    };
    let tree_include = tree.as_ref().map(|r| r.join("libring"));

    if let Some(dir) = env::var_os("RINGD_LIB_DIR") {
        let dir = PathBuf::from(dir);
        let include = match env::var_os("RINGD_INCLUDE_DIR") {
            Some(inc) => PathBuf::from(inc),
            None => tree_include.unwrap_or_else(|| dir.join("../include")),
        };
        return link_dir(&dir, include);
    }
    if let Some(root) = &tree {
        let dir = root.join("build/lib");
        if dir.join("libring.a").is_file() || dir.join("libring.so").exists() {
            return link_dir(&dir, root.join("libring"));
        }
    }
    if let Some(lib) = link_pkg_config() {
        return lib;
    }
    panic!(
        "ringd-sys: libring not found. Build the ringd tree first (`make` at its root: \
         build/lib/libring.a), or set RINGD_LIB_DIR to a directory holding libring.a or \
         libring.so (and RINGD_INCLUDE_DIR to ring.h's), or install libring so that \
         `pkg-config --libs libring` works (`make install`; PKG_CONFIG_PATH for a prefix \
         outside pkg-config's path)"
    );
}

/// Links the libring of one directory: libring.a statically when it is there.
fn link_dir(dir: &Path, include: PathBuf) -> Libring {
    let dir = fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let pc = fs::read_to_string(dir.join("libring.pc")).unwrap_or_default();
    println!("cargo:rustc-link-search=native={}", dir.display());
    let mut rpath = Vec::new();
    if dir.join("libring.a").is_file() {
        println!("cargo:rerun-if-changed={}", dir.join("libring.a").display());
        println!("cargo:rustc-link-lib=static=ring");
        let private = pc_field(&pc, "Libs.private:").unwrap_or_else(|| "-lm".to_string());
        emit_link_flags(&private, &mut rpath);
    } else if dir.join("libring.so").exists() {
        println!("cargo:rerun-if-changed={}", dir.join("libring.so").display());
        println!("cargo:rustc-link-lib=dylib=ring");
        rpath.push(dir.display().to_string());
    } else {
        panic!(
            "ringd-sys: RINGD_LIB_DIR={} holds neither libring.a nor libring.so",
            dir.display()
        );
    }
    println!("cargo:rpath={}", rpath.join(":"));
    let cuda = pc_field(&pc, "cuda=").map_or(false, |v| v == "1");
    Libring {
        include: vec![include],
        cuda,
    }
}

/// An installed libring, as pkg-config describes it; None when it does not.
fn link_pkg_config() -> Option<Libring> {
    let libs = pkg_config(&["--libs", "libring"])?;
    let cflags = pkg_config(&["--cflags-only-I", "libring"]).unwrap_or_default();
    let cuda = pkg_config(&["--variable=cuda", "libring"]).map_or(false, |v| v == "1");
    let mut rpath = Vec::new();
    emit_link_flags(&libs, &mut rpath);
    println!("cargo:rpath={}", rpath.join(":"));
    let include = cflags
        .split_whitespace()
        .filter_map(|f| f.strip_prefix("-I"))
        .map(PathBuf::from)
        .collect();
    Some(Libring { include, cuda })
}

fn pkg_config(args: &[&str]) -> Option<String> {
    let pkg = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let out = Command::new(pkg).args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The rest of the line that starts with `key` in a .pc file.
fn pc_field(pc: &str, key: &str) -> Option<String> {
    pc.lines()
        .find_map(|l| l.strip_prefix(key))
        .map(|v| v.trim().to_string())
}

/// -L, -l and -Wl,-rpath flags as cargo directives; -pthread is Rust's anyway.
fn emit_link_flags(flags: &str, rpath: &mut Vec<String>) {
    for flag in flags.split_whitespace() {
        if flag.contains("${") {
            continue; // a .pc variable we do not expand: not in libring's Libs.private
        } else if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={}", dir);
        } else if let Some(name) = flag.strip_prefix("-l") {
            println!("cargo:rustc-link-lib={}", name);
        } else if let Some(dirs) = flag.strip_prefix("-Wl,-rpath,") {
            rpath.extend(dirs.split(',').map(str::to_string));
        }
    }
}

// ---------------------------------------------------------------------------
// Reading ffi.rs
// ---------------------------------------------------------------------------

fn parse_sources(files: &[&str]) -> Decls {
    let mut decls = Decls::default();
    for file in files {
        let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("{}: {}", file, e));
        // Comments sit on lines of their own in these files.
        let code: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with("//"))
            .map(|l| format!("{}\n", l))
            .collect();
        parse_items(&code, &mut decls);
    }
    decls
}

fn parse_items(code: &str, decls: &mut Decls) {
    let mut rest = code;
    while let Some(at) = rest.find("pub ") {
        rest = &rest[at + 4..];
        if let Some(item) = rest.strip_prefix("fn ") {
            let end = item.find(';').expect("a pub fn without ';'");
            decls.fns.push(parse_fn(&item[..end]));
        } else if let Some(item) = rest.strip_prefix("const ") {
            let end = item.find(';').expect("a pub const without ';'");
            let (name, ty) = split_pair(item[..end].split('=').next().unwrap_or(""));
            decls.consts.push((name, ty));
        } else if let Some(item) = rest.strip_prefix("type ") {
            let end = item.find(';').expect("a pub type without ';'");
            let mut parts = item[..end].splitn(2, '=');
            let name = parts.next().unwrap_or("").trim().to_string();
            let ty = parts.next().unwrap_or("").trim().to_string();
            decls.aliases.insert(name, ty);
        } else if let Some(item) = rest.strip_prefix("struct ring_options") {
            let open = item.find('{').expect("struct ring_options without '{'");
            let close = item.find('}').expect("struct ring_options without '}'");
            decls.option_fields = item[open + 1..close]
                .split(',')
                .map(|f| f.trim().trim_start_matches("pub "))
                .filter(|f| !f.is_empty())
                .map(split_pair)
                .collect();
        }
    }
}

/// "name: Type" -> (name, Type).
fn split_pair(s: &str) -> (String, String) {
    let mut parts = s.splitn(2, ':');
    let name = parts.next().unwrap_or("").trim().to_string();
    let ty = parts.next().unwrap_or("").trim().to_string();
    (name, ty)
}

/// "name(a: T, b: U) -> R" (whitespace and newlines anywhere).
fn parse_fn(item: &str) -> FnDecl {
    let open = item.find('(').expect("fn without '('");
    let close = item.rfind(')').expect("fn without ')'");
    let params = item[open + 1..close]
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| split_pair(p).1)
        .collect();
    let ret = item[close + 1..]
        .trim()
        .strip_prefix("->")
        .map(|r| r.trim().to_string());
    FnDecl {
        name: item[..open].trim().to_string(),
        params,
        ret,
    }
}

/// A Rust type of ffi.rs spelled in C ("*const *mut T" is "T * const *").
fn c_type(rust: &str, decls: &Decls) -> String {
    let t = rust.trim();
    if let Some(inner) = t.strip_prefix("*const ") {
        return format!("{} const *", c_type(inner, decls));
    }
    if let Some(inner) = t.strip_prefix("*mut ") {
        return format!("{} *", c_type(inner, decls));
    }
    let c = match t {
        "c_int" | "i32" => "int",
        "c_uint" | "u32" => "unsigned int",
        "c_char" => "char",
        "c_void" => "void",
        "usize" => "size_t",
        "ring_comm" | "ring_request" => t,
        "ring_options" => "struct ring_options",
        "CUstream_st" => "struct CUstream_st",
        _ => {
            return match decls.aliases.get(t) {
                Some(target) => c_type(target, decls),
                None => panic!("ringd-sys build.rs: no C spelling for the Rust type `{}`", t),
            }
        }
    };
    c.to_string()
}

// ---------------------------------------------------------------------------
// The checks
// ---------------------------------------------------------------------------

fn cc() -> String {
    env::var("CC").unwrap_or_else(|_| "cc".to_string())
}

fn cc_base(lib: &Libring) -> Command {
    let mut cmd = Command::new(cc());
    cmd.arg("-std=gnu11");
    for dir in &lib.include {
        cmd.arg(format!("-I{}", dir.display()));
        println!("cargo:rerun-if-changed={}", dir.join("ring.h").display());
        println!("cargo:rerun-if-changed={}", dir.join("ring_types.h").display());
    }
    // The CUDA declarations are checked whether or not this libring has them.
    cmd.arg("-DRING_HAVE_CUDA=1");
    cmd
}

/// Runs cmd; on failure, panics with its output and what it means.
fn run_checked(mut cmd: Command, what: &str) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("ringd-sys: cannot run {:?} ({}): {}", cmd, what, e));
    if !out.status.success() {
        panic!(
            "ringd-sys: {} failed:\n{}{}",
            what,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Compiles ring.h with every function of ffi.rs declared again.
fn check_prototypes(lib: &Libring, decls: &Decls, out: &Path) {
    let mut c = String::from("#include <stddef.h>\n#include <ring.h>\n\n");
    c.push_str("/* ffi.rs, spelled in C: a type that differs from ring.h's is an error. */\n");
    for f in &decls.fns {
        let params: Vec<String> = f.params.iter().map(|p| c_type(p, decls)).collect();
        let ret = f.ret.as_deref().map_or("void".to_string(), |r| c_type(r, decls));
        let params = if params.is_empty() {
            "void".to_string()
        } else {
            params.join(", ")
        };
        let _ = writeln!(c, "{} {}({});", ret, f.name, params);
    }
    c.push_str("\n/* struct ring_options' fields as ffi.rs types them. */\n");
    for (name, ty) in &decls.option_fields {
        let _ = writeln!(
            c,
            "_Static_assert(__builtin_types_compatible_p(__typeof__(((struct ring_options *)0)->{}), {}),\n\t\"ring_options.{} is not {} in ring.h\");",
            name,
            c_type(ty, decls),
            name,
            ty
        );
    }
    let src = out.join("ring_h_check.c");
    fs::write(&src, c).expect("write ring_h_check.c");
    let mut cmd = cc_base(lib);
    // ffi.rs types ring.h's enums as their compatible integer (c_uint), which
    // C allows; GCC 13 and later (Debian 13) warn about the redeclaration
    // all the same (-Wenum-int-mismatch, in -Wall).  Older GCCs ignore the
    // unknown -Wno- option.
    cmd.args(["-Wall", "-Werror", "-Wno-enum-int-mismatch", "-c", "-o"])
        .arg(out.join("ring_h_check.o"))
        .arg(&src);
    run_checked(
        cmd,
        "the check of src/ffi.rs against ring.h (a declaration differs: fix ffi.rs)",
    );
}

/// The functions ring.h declares: in the preprocessed header, every name
/// followed by '(' outside parentheses (ring.h has no function pointers).
fn header_functions(pre: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut depth = 0;
    let mut ident = String::new();
    let mut last = String::new();
    for ch in pre.chars() {
        if ch.is_alphanumeric() || ch == '_' {
            ident.push(ch);
            continue;
        }
        if !ident.is_empty() {
            last = std::mem::take(&mut ident);
        }
        match ch {
            '(' => {
                if depth == 0 && last.starts_with("ring_") {
                    names.insert(last.clone());
                }
                depth += 1;
            }
            ')' => depth -= 1,
            c if c.is_whitespace() => continue,
            _ => {}
        }
        last.clear();
    }
    names
}

/// The functions, enumerators and macros that ring.h declares.
fn header_names(lib: &Libring, out: &Path) -> BTreeSet<String> {
    let src = out.join("ring_h_names.c");
    fs::write(&src, "#include <ring.h>\n").expect("write ring_h_names.c");
    let mut cmd = cc_base(lib);
    cmd.args(["-E", "-P"]).arg(&src);
    let pre = run_checked(cmd, "preprocessing ring.h");
    let mut names = header_functions(&pre);
    let mut rest = pre.as_str();
    while let Some(at) = rest.find("enum ring_") {
        rest = &rest[at..];
        let (open, close) = match (rest.find('{'), rest.find('}')) {
            (Some(o), Some(c)) if o < c => (o, c),
            _ => break,
        };
        for e in rest[open + 1..close].split(',') {
            let name = e.split('=').next().unwrap_or("").trim();
            if !name.is_empty() {
                names.insert(name.to_string());
            }
        }
        rest = &rest[close..];
    }
    let mut cmd = cc_base(lib);
    cmd.args(["-dM", "-E"]).arg(&src);
    let macros = run_checked(cmd, "listing ring.h's macros");
    let guards = ["RING_H", "RING_TYPES_H", "RING_HAVE_CUDA"];
    for l in macros.lines() {
        if let Some(name) = l.strip_prefix("#define ").and_then(|d| d.split(' ').next()) {
            if name.starts_with("RING_") && !guards.contains(&name) {
                names.insert(name.to_string());
            }
        }
    }
    names
}

/// Builds and runs a C program that prints the header's values as Rust; writes
/// them (ring_h_facts.rs), the assertions over them (ring_h_asserts.rs) and the
/// lists of what one side has and the other lacks.
fn write_facts(lib: &Libring, decls: &Decls, out: &Path) {
    let mut c = String::from("#include <stddef.h>\n#include <stdio.h>\n#include <ring.h>\n\n");
    c.push_str("int main(void)\n{\n");
    c.push_str("\tprintf(\"pub const SIZEOF_RING_OPTIONS: usize = %zu;\\n\", sizeof(struct ring_options));\n");
    c.push_str("\tprintf(\"pub const ALIGNOF_RING_OPTIONS: usize = %zu;\\n\", _Alignof(struct ring_options));\n");
    c.push_str("\tprintf(\"pub const OFFSETS_RING_OPTIONS: &[(&str, usize)] = &[\\n\");\n");
    for (name, _) in &decls.option_fields {
        let _ = writeln!(
            c,
            "\tprintf(\"    (\\\"{0}\\\", %zu),\\n\", offsetof(struct ring_options, {0}));",
            name
        );
    }
    c.push_str("\tprintf(\"];\\n\");\n");
    let mut asserts = String::new();
    for (name, ty) in &decls.consts {
        if ty.starts_with('&') {
            // The string constant: printed as text, compared by the test.
            let _ = writeln!(c, "\tprintf(\"pub const {0}: &str = \\\"%s\\\";\\n\", {0});", name);
            continue;
        }
        let _ = writeln!(
            c,
            "\tprintf(\"pub const {0}: i64 = %lld;\\n\", (long long)({0}));",
            name
        );
        let _ = writeln!(
            asserts,
            "const _: () = assert!({0} as i64 == checked::{0}, \"ffi.rs: {0} differs from ring.h\");",
            name
        );
    }
    c.push_str("\treturn 0;\n}\n");
    asserts.push_str(
        "const _: () = assert!(std::mem::size_of::<ring_options>() == checked::SIZEOF_RING_OPTIONS, \
         \"ffi.rs: struct ring_options has another size in ring.h\");\n\
         const _: () = assert!(std::mem::align_of::<ring_options>() == checked::ALIGNOF_RING_OPTIONS, \
         \"ffi.rs: struct ring_options has another alignment in ring.h\");\n",
    );

    let src = out.join("ring_h_facts.c");
    let exe = out.join("ring_h_facts");
    fs::write(&src, c).expect("write ring_h_facts.c");
    let mut cmd = cc_base(lib);
    cmd.arg("-o").arg(&exe).arg(&src);
    run_checked(cmd, "compiling the constants program (a constant of ffi.rs is not in ring.h?)");
    let mut facts = run_checked(Command::new(&exe), "running the constants program");
    facts.push_str(&name_lists(lib, decls, out));
    fs::write(out.join("ring_h_facts.rs"), facts).expect("write ring_h_facts.rs");
    fs::write(out.join("ring_h_asserts.rs"), asserts).expect("write ring_h_asserts.rs");
}

/// RING_H_MISSING: in ring.h, not in ffi.rs; RUST_EXTRA: the reverse.
fn name_lists(lib: &Libring, decls: &Decls, out: &Path) -> String {
    let header = header_names(lib, out);
    let rust: BTreeSet<String> = decls
        .fns
        .iter()
        .map(|f| f.name.clone())
        .chain(decls.consts.iter().map(|(n, _)| n.clone()))
        .collect();
    let list = |names: Vec<&String>| {
        names
            .iter()
            .map(|n| format!("\"{}\"", n))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "pub const RING_H_MISSING: &[&str] = &[{}];\npub const RUST_EXTRA: &[&str] = &[{}];\n\
         pub const LIBRING_HAS_CUDA: bool = {};\n",
        list(header.difference(&rust).collect()),
        list(rust.difference(&header).collect()),
        lib.cuda
    )
}

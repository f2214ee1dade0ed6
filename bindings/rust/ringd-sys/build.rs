//! build.rs of ringd-sys: finds libring and tells cargo how to link it.  The
//! declarations themselves are src/bindings.rs, generated from ring.h by
//! bindgen (gen-bindings) and committed; `make lint` checks that it is current.
//!
//! Where libring comes from, first match wins:
//!   1. RINGD_LIB_DIR (a directory with libring.a or libring.so);
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
//! Whether that libring has the CUDA entry points (libring.pc's `cuda`
//! variable) becomes `checked::LIBRING_HAS_CUDA`.
use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What the build learned about the libring it links.
struct Libring {
    cuda: bool,
}

fn main() {
    for var in ["RINGD_LIB_DIR", "PKG_CONFIG_PATH"] {
        println!("cargo:rerun-if-env-changed={}", var);
    }
    println!("cargo:rerun-if-changed=build.rs");

    let lib = locate();
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    let facts = format!(
        "/// Whether the libring linked was built with CUDA (its `_cuda` entry points\n\
         /// exist; calling them otherwise fails to link).\n\
         pub const LIBRING_HAS_CUDA: bool = {};\n",
        lib.cuda
    );
    fs::write(out.join("libring_facts.rs"), facts).expect("writing libring_facts.rs");
}

fn locate() -> Libring {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    // bindings/rust/ringd-sys -> the tree's root, when this crate is in one.
    let root = manifest.join("../../..");
    let tree = if root.join("libring/ring.h").is_file() {
        Some(root)
    } else {
        None
    };

    if let Some(dir) = env::var_os("RINGD_LIB_DIR") {
        return link_dir(&PathBuf::from(dir));
    }
    if let Some(root) = &tree {
        let dir = root.join("build/lib");
        if dir.join("libring.a").is_file() || dir.join("libring.so").exists() {
            return link_dir(&dir);
        }
    }
    if let Some(lib) = link_pkg_config() {
        return lib;
    }
    panic!(
        "ringd-sys: libring not found. Build the ringd tree first (`make` at its root: \
         build/lib/libring.a), or set RINGD_LIB_DIR to a directory holding libring.a or \
         libring.so, or install libring so that \
         `pkg-config --libs libring` works (`make install`; PKG_CONFIG_PATH for a prefix \
         outside pkg-config's path)"
    );
}

/// Links the libring of one directory: libring.a statically when it is there.
fn link_dir(dir: &Path) -> Libring {
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
        println!(
            "cargo:rerun-if-changed={}",
            dir.join("libring.so").display()
        );
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
    Libring { cuda }
}

/// An installed libring, as pkg-config describes it; None when it does not.
fn link_pkg_config() -> Option<Libring> {
    let libs = pkg_config(&["--libs", "libring"])?;
    let cuda = pkg_config(&["--variable=cuda", "libring"]).map_or(false, |v| v == "1");
    let mut rpath = Vec::new();
    emit_link_flags(&libs, &mut rpath);
    println!("cargo:rpath={}", rpath.join(":"));
    Some(Libring { cuda })
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

//! build.rs of ringd: the run-time library directories that ringd-sys found
//! (a dynamic libring's, or CUDA's from libring.pc) become an rpath of this
//! crate's tests and examples; cargo hands a link-arg only to the crate whose
//! build script prints it, so ringd-sys cannot do this for us.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_RING_RPATH");
    if let Ok(dirs) = std::env::var("DEP_RING_RPATH") {
        for dir in dirs.split(':').filter(|d| !d.is_empty()) {
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
        }
    }
}

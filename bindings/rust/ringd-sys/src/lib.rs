//! Raw bindings to libring, the client library of ringd: `ring.h` as `extern
//! "C"` declarations, written by hand in [`ffi.rs`](self) and checked against
//! the header at every build.
//!
//! The build script compiles a C file that includes `ring.h` and declares every
//! function again with the prototype these declarations assume (`usize` is
//! `size_t`, the enum types are `unsigned int`), so a drift in an argument's
//! type or count fails the build; it also compiles and runs a C program that
//! prints the size and alignment of `struct ring_options` and the value of
//! every constant, which `const` assertions below compare with this crate's.
//! What ring.h has and this crate lacks (or the reverse) is listed in
//! `RING_H_MISSING` / `RUST_EXTRA`, which the crate's test requires to be
//! empty.
//!
//! The CUDA entry points (`ring_allreduce_cuda` ...) are declared always and
//! exist only in a libring built with CUDA: `checked::LIBRING_HAS_CUDA` says
//! whether this one was (calling them otherwise fails to link).
//!
//! Nothing here is safe to call without reading ring.h: use the `ringd` crate.
#![allow(non_camel_case_types)]

mod ffi;
pub use ffi::*;

mod cuda;
pub use cuda::*;

/// What the build script found out by compiling against ring.h.
pub mod checked {
    include!(concat!(env!("OUT_DIR"), "/ring_h_facts.rs"));
}

// A constant whose value differs from the header's, or a struct ring_options of
// another size, fails the build here.
include!(concat!(env!("OUT_DIR"), "/ring_h_asserts.rs"));

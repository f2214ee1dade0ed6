//! ffi.rs against ring.h, beyond what the build already checks (prototypes,
//! constants, the size of struct ring_options): nothing of ring.h is missing,
//! nothing extra is declared, the fields lie where C puts them, and the library
//! linked is the one the header describes.
use ringd_sys::checked;
use ringd_sys::*;
use std::ffi::CStr;
use std::mem::MaybeUninit;

#[test]
fn every_declaration_of_ring_h_is_bound() {
    assert!(
        checked::RING_H_MISSING.is_empty(),
        "ring.h declares what ffi.rs lacks: {:?}",
        checked::RING_H_MISSING
    );
    assert!(
        checked::RUST_EXTRA.is_empty(),
        "ffi.rs declares what ring.h lacks: {:?}",
        checked::RUST_EXTRA
    );
}

#[test]
fn ring_options_fields_lie_where_c_puts_them() {
    let o = MaybeUninit::<ring_options>::uninit();
    let base = o.as_ptr() as usize;
    // SAFETY: addr_of! computes field addresses without reading anything.
    let ours = unsafe {
        let p = o.as_ptr();
        [
            ("socket", std::ptr::addr_of!((*p).socket) as usize - base),
            ("job", std::ptr::addr_of!((*p).job) as usize - base),
            ("local_rank", std::ptr::addr_of!((*p).local_rank) as usize - base),
            ("local_size", std::ptr::addr_of!((*p).local_size) as usize - base),
            ("timeout_ms", std::ptr::addr_of!((*p).timeout_ms) as usize - base),
            ("arena_bytes", std::ptr::addr_of!((*p).arena_bytes) as usize - base),
            ("rank", std::ptr::addr_of!((*p).rank) as usize - base),
            ("size", std::ptr::addr_of!((*p).size) as usize - base),
        ]
    };
    assert_eq!(&ours[..], checked::OFFSETS_RING_OPTIONS);
}

#[test]
fn default_socket_matches() {
    let ours = CStr::from_bytes_with_nul(RING_DEFAULT_SOCKET).unwrap();
    assert_eq!(ours.to_str().unwrap(), checked::RING_DEFAULT_SOCKET);
}

#[test]
fn the_linked_library_agrees_with_the_header() {
    // SAFETY: these helpers take any value and return static strings.
    unsafe {
        assert_eq!(ring_dtype_size(RING_FLOAT32), 4);
        assert_eq!(ring_dtype_size(RING_BFLOAT16), 2);
        assert_eq!(ring_dtype_size(RING_DTYPE_COUNT), 0);
        let name = CStr::from_ptr(ring_dtype_name(RING_FLOAT64));
        assert_eq!(name.to_str().unwrap(), "float64");
        let op = CStr::from_ptr(ring_op_name(RING_SUM));
        assert_eq!(op.to_str().unwrap(), "sum");
        let e = CStr::from_ptr(ring_strerror(RING_EMISMATCH));
        assert!(e.to_str().unwrap().contains("dtype/shape"));
    }
}

//! The generated declarations against the library linked: the layout of
//! struct ring_options is checked by bindgen's own tests in src/bindings.rs;
//! here the constants and the library's answers must agree with ring.h.
use ringd_sys::*;
use std::ffi::CStr;

#[test]
fn default_socket_is_the_headers() {
    let ours = CStr::from_bytes_with_nul(RING_DEFAULT_SOCKET).unwrap();
    assert_eq!(ours.to_str().unwrap(), "/run/ringd/ringd.sock");
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

#[test]
fn default_options_are_all_zero() {
    let o = ring_options::default();
    assert!(o.socket.is_null() && o.job.is_null());
    assert_eq!(
        (o.local_rank, o.local_size, o.timeout_ms, o.arena_bytes),
        (0, 0, 0, 0)
    );
}

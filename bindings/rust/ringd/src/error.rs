//! Errors: libring's RING_E* code as an enum, with the detail text libring gave
//! for that failure (ring_last_error, or ring_request_error for a request).
use ringd_sys as sys;
use std::fmt;
use std::os::raw::{c_char, c_int};

/// The RING_E* codes of ring_types.h.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// RING_EINVAL: a bad argument (also this crate's own argument checks).
    Invalid,
    /// RING_ENOMEM: out of memory or out of arena space.
    NoMemory,
    /// RING_EDAEMON: the local daemon is unreachable or went away.
    Daemon,
    /// RING_EPEER: a peer daemon failed or its link broke.
    Peer,
    /// RING_ETIMEDOUT: an operation did not complete within its bound.
    TimedOut,
    /// RING_EMISMATCH: ranks called different collectives, or dtype/shape differ.
    Mismatch,
    /// RING_EABORTED: aborted by another rank or the daemon.
    Aborted,
    /// RING_EPROTO: a malformed message (version skew or corruption).
    Proto,
    /// RING_EPERM: not allowed (credentials, limits).
    Permission,
    /// RING_ENOTSUP: not supported by this build or configuration.
    NotSupported,
    /// RING_ECLOSED: the communicator was closed.
    Closed,
    /// RING_EDEVICE: a device (CUDA) call or copy failed.
    Device,
    /// RING_EREVOKED: the communicator was revoked (ring_comm_revoke).
    Revoked,
    /// A code this crate does not know (a newer libring).
    Other(i32),
}

impl ErrorCode {
    /// The code for one of libring's negative return values.
    pub fn from_raw(rc: c_int) -> ErrorCode {
        match rc {
            sys::RING_EINVAL => ErrorCode::Invalid,
            sys::RING_ENOMEM => ErrorCode::NoMemory,
            sys::RING_EDAEMON => ErrorCode::Daemon,
            sys::RING_EPEER => ErrorCode::Peer,
            sys::RING_ETIMEDOUT => ErrorCode::TimedOut,
            sys::RING_EMISMATCH => ErrorCode::Mismatch,
            sys::RING_EABORTED => ErrorCode::Aborted,
            sys::RING_EPROTO => ErrorCode::Proto,
            sys::RING_EPERM => ErrorCode::Permission,
            sys::RING_ENOTSUP => ErrorCode::NotSupported,
            sys::RING_ECLOSED => ErrorCode::Closed,
            sys::RING_EDEVICE => ErrorCode::Device,
            sys::RING_EREVOKED => ErrorCode::Revoked,
            other => ErrorCode::Other(other),
        }
    }

    /// The RING_E* value.
    pub fn raw(self) -> c_int {
        match self {
            ErrorCode::Invalid => sys::RING_EINVAL,
            ErrorCode::NoMemory => sys::RING_ENOMEM,
            ErrorCode::Daemon => sys::RING_EDAEMON,
            ErrorCode::Peer => sys::RING_EPEER,
            ErrorCode::TimedOut => sys::RING_ETIMEDOUT,
            ErrorCode::Mismatch => sys::RING_EMISMATCH,
            ErrorCode::Aborted => sys::RING_EABORTED,
            ErrorCode::Proto => sys::RING_EPROTO,
            ErrorCode::Permission => sys::RING_EPERM,
            ErrorCode::NotSupported => sys::RING_ENOTSUP,
            ErrorCode::Closed => sys::RING_ECLOSED,
            ErrorCode::Device => sys::RING_EDEVICE,
            ErrorCode::Revoked => sys::RING_EREVOKED,
            ErrorCode::Other(rc) => rc,
        }
    }

    /// libring's one-line description (ring_strerror).
    pub fn describe(self) -> String {
        // SAFETY: ring_strerror returns a static string for any value.
        unsafe { c_text(sys::ring_strerror(self.raw())) }
    }
}

/// A failure: the code and libring's detailed message ("ring_recv: rank 1 sent
/// float32[4], this rank posted int32[4]").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    code: ErrorCode,
    detail: String,
}

/// `Result` with this crate's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error with the given code and text.
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> Error {
        Error {
            code,
            detail: detail.into(),
        }
    }

    /// A bad argument found by this crate before calling libring.
    pub(crate) fn invalid(detail: impl Into<String>) -> Error {
        Error::new(ErrorCode::Invalid, detail)
    }

    /// The failure `rc` of a call on `comm` (null: a call with no communicator,
    /// such as ring_open), with ring_last_error's text.
    pub(crate) fn last(rc: c_int, comm: *const sys::ring_comm) -> Error {
        // SAFETY: ring_last_error accepts null and any live comm; the text is
        // copied before the next call on comm can change it.
        let detail = unsafe { c_text(sys::ring_last_error(comm)) };
        Error::new(ErrorCode::from_raw(rc), detail)
    }

    /// The failure `rc` of a request, with ring_request_error's text.
    pub(crate) fn of_request(rc: c_int, req: *const sys::ring_request) -> Error {
        // SAFETY: req is live (not yet freed) and complete.
        let detail = unsafe { c_text(sys::ring_request_error(req)) };
        Error::new(ErrorCode::from_raw(rc), detail)
    }

    /// The RING_E* code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// libring's detailed message (may be empty).
    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// A refused attach whose local rank is held by this very process: the
    /// daemon names the holder's pid ("already attached by pid N", "this same
    /// process (pid N) already holds ...").  A pid the daemon sees through
    /// another pid namespace does not match, and the error stays as it was.
    pub(crate) fn is_attached_by_this_process(&self) -> bool {
        if self.code != ErrorCode::Invalid || !self.detail.contains("already") {
            return false;
        }
        let pid = format!("pid {}", std::process::id());
        self.detail
            .match_indices(&pid)
            .any(|(at, _)| !self.detail[at + pid.len()..].starts_with(|c: char| c.is_ascii_digit()))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.detail.is_empty() {
            f.write_str(&self.code.describe())
        } else {
            f.write_str(&self.detail)
        }
    }
}

impl std::error::Error for Error {}

/// libring's messages are at most LR_ERR_MAX (1279) bytes; the bound keeps a
/// read of a message that another thread is rewriting inside its buffer.
const TEXT_MAX: usize = 1279;

/// Copies a C string (null: empty), at most TEXT_MAX bytes of it.
///
/// # Safety
/// `p` is null or points to a NUL-terminated string, or to at least TEXT_MAX
/// readable bytes.
pub(crate) unsafe fn c_text(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    let mut len = 0;
    while len < TEXT_MAX && *p.add(len) != 0 {
        len += 1;
    }
    let bytes = std::slice::from_raw_parts(p as *const u8, len);
    String::from_utf8_lossy(bytes).into_owned()
}

/// Ok for 0, else the failure of a call on `comm`.
pub(crate) fn check(rc: c_int, comm: *const sys::ring_comm) -> Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(Error::last(rc, comm))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attach_held_by_this_process_is_recognised_in_both_daemon_texts() {
        let me = std::process::id();
        let said = |text: String| Error::new(ErrorCode::Invalid, text);
        let old = format!(
            "job j: local rank 0 (rank 0) is already attached by pid {}; this process asked \
             for rank 0 (give each process its own LOCAL_RANK)",
            me
        );
        let new = format!(
            "job j: this same process (pid {}) already holds local rank 0",
            me
        );
        assert!(said(old.clone()).is_attached_by_this_process());
        assert!(said(new).is_attached_by_this_process());
        // Another process, a pid that only starts like ours, another code.
        let other = old.replace(&format!("pid {}", me), &format!("pid {}", me + 1));
        assert!(!said(other).is_attached_by_this_process());
        let longer = old.replace(&format!("pid {}", me), &format!("pid {}7", me));
        assert!(!said(longer).is_attached_by_this_process());
        assert!(!Error::new(ErrorCode::TimedOut, old).is_attached_by_this_process());
    }
}

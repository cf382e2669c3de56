//! The errors [`crate::SimFs`] returns, shaped like the ones Linux gives so that
//! code tested on the simulator sees what it would see on [`crate::OsFs`].
//!
//! On Linux every error is a raw OS error (same kind, same message as the real
//! syscall). Elsewhere the errno numbers differ, so the same kinds are built
//! with [`io::Error::new`] and a Linux-like message: the kinds, and therefore
//! the trace hash, are the same on every platform.

use std::io::{self, ErrorKind};

fn os(errno: i32, kind: ErrorKind, msg: &'static str) -> io::Error {
    if cfg!(target_os = "linux") {
        io::Error::from_raw_os_error(errno)
    } else {
        io::Error::new(kind, msg)
    }
}

/// ENOENT.
pub(crate) fn not_found() -> io::Error {
    os(2, ErrorKind::NotFound, "No such file or directory (os error 2)")
}
/// EIO.
pub(crate) fn eio() -> io::Error {
    os(5, ErrorKind::Other, "Input/output error (os error 5)")
}
/// EBADF: a handle used for an access it was not opened for.
pub(crate) fn bad_fd() -> io::Error {
    os(9, ErrorKind::Other, "Bad file descriptor (os error 9)")
}
/// EAGAIN / EWOULDBLOCK: a lock is held.
pub(crate) fn would_block() -> io::Error {
    os(
        11,
        ErrorKind::WouldBlock,
        "Resource temporarily unavailable (os error 11)",
    )
}
/// EBUSY: renaming the root.
pub(crate) fn busy() -> io::Error {
    os(16, ErrorKind::ResourceBusy, "Device or resource busy (os error 16)")
}
/// EEXIST.
pub(crate) fn exists() -> io::Error {
    os(17, ErrorKind::AlreadyExists, "File exists (os error 17)")
}
/// ENOTDIR.
pub(crate) fn not_dir() -> io::Error {
    os(20, ErrorKind::NotADirectory, "Not a directory (os error 20)")
}
/// EISDIR.
pub(crate) fn is_dir() -> io::Error {
    os(21, ErrorKind::IsADirectory, "Is a directory (os error 21)")
}
/// EINVAL.
pub(crate) fn invalid() -> io::Error {
    os(22, ErrorKind::InvalidInput, "Invalid argument (os error 22)")
}
/// EFBIG.
pub(crate) fn too_large() -> io::Error {
    os(27, ErrorKind::FileTooLarge, "File too large (os error 27)")
}
/// ENOSPC.
pub(crate) fn no_space() -> io::Error {
    os(28, ErrorKind::StorageFull, "No space left on device (os error 28)")
}
/// ENOTEMPTY.
pub(crate) fn not_empty() -> io::Error {
    os(39, ErrorKind::DirectoryNotEmpty, "Directory not empty (os error 39)")
}
/// A handle or lock taken before a crash: the process that owned it is dead.
pub(crate) fn stale() -> io::Error {
    io::Error::other("simfs: stale handle from before a crash")
}
/// A path that is not valid UTF-8 (SimFs names are UTF-8 only).
pub(crate) fn bad_name() -> io::Error {
    io::Error::new(ErrorKind::InvalidInput, "simfs: path is not valid UTF-8")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_match_linux() {
        assert_eq!(not_found().kind(), ErrorKind::NotFound);
        assert_eq!(would_block().kind(), ErrorKind::WouldBlock);
        assert_eq!(no_space().kind(), ErrorKind::StorageFull);
        assert_eq!(is_dir().kind(), ErrorKind::IsADirectory);
        assert_eq!(not_dir().kind(), ErrorKind::NotADirectory);
        assert_eq!(too_large().kind(), ErrorKind::FileTooLarge);
        assert_eq!(exists().kind(), ErrorKind::AlreadyExists);
        assert_eq!(invalid().kind(), ErrorKind::InvalidInput);
        assert_eq!(stale().kind(), ErrorKind::Other);
    }
}

//! [`OsFs`]: the real filesystem. (Stub: to be written.)
#![allow(missing_docs)]

/// The real filesystem.
#[derive(Clone, Debug, Default)]
pub struct OsFs {}
/// An open file of [`OsFs`].
pub struct OsFile {}
/// A held directory lock of [`OsFs`].
pub struct OsDirLock {}

//! A write-ahead log over [`simfs::Fs`].

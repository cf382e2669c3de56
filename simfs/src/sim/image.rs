//! [`Image`]: the bytes of one file, stored sparsely in pages of the device's
//! atomic write unit. Used twice per inode: the durable image (what a power
//! loss reveals) and the volatile image (the page cache, what reads see).
//!
//! Invariant: no page lies wholly at or past `len`, and the bytes of the last
//! page past `len` are zero, so extending the file reads zeros. Memory is
//! proportional to the pages written, not to the length: a hole or a
//! `set_len` extension costs nothing.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Source of content versions: unique across every image of every SimFs in
/// the process, so equal versions mean equal content even after an image
/// is replaced by a clone of another. Only compared for equality by
/// inspection callers (a cache); never part of the simulation.
static VERSIONS: AtomicU64 = AtomicU64::new(1);

/// A sparse byte image of one file.
#[derive(Clone, Debug, Default)]
pub(crate) struct Image {
    /// The length in bytes. Changed only through the methods below.
    pub(crate) len: u64,
    /// Page index -> page bytes (`unit` bytes each). A missing page is zeros.
    pages: BTreeMap<u64, Box<[u8]>>,
    /// Changes (to a value no image had before) on every change of the
    /// content; 0 for an image never written.
    version: u64,
}

impl PartialEq for Image {
    fn eq(&self, other: &Image) -> bool {
        self.len == other.len && self.pages == other.pages
    }
}

impl Eq for Image {}

impl Image {
    /// The content version: equal versions mean equal content.
    pub(crate) fn version(&self) -> u64 {
        self.version
    }

    fn touch(&mut self) {
        self.version = VERSIONS.fetch_add(1, Ordering::Relaxed);
    }

    /// Copies `[offset, offset + buf.len())` into `buf`, stopping at `len`.
    /// Returns the number of bytes copied.
    pub(crate) fn read(&self, unit: u64, offset: u64, buf: &mut [u8]) -> usize {
        if offset >= self.len {
            return 0;
        }
        let n = (buf.len() as u64).min(self.len - offset) as usize;
        let mut done = 0usize;
        while done < n {
            let pos = offset + done as u64;
            let idx = pos / unit;
            let in_page = (pos % unit) as usize;
            let take = (unit as usize - in_page).min(n - done);
            match self.pages.get(&idx) {
                Some(page) => buf[done..done + take].copy_from_slice(&page[in_page..in_page + take]),
                None => buf[done..done + take].fill(0),
            }
            done += take;
        }
        n
    }

    /// Writes `data` at `offset`, extending `len` if needed.
    pub(crate) fn write(&mut self, unit: u64, offset: u64, data: &[u8]) {
        self.touch();
        let mut done = 0usize;
        while done < data.len() {
            let pos = offset + done as u64;
            let idx = pos / unit;
            let in_page = (pos % unit) as usize;
            let take = (unit as usize - in_page).min(data.len() - done);
            let page = self.page_mut(unit, idx);
            page[in_page..in_page + take].copy_from_slice(&data[done..done + take]);
            done += take;
        }
        self.len = self.len.max(offset + data.len() as u64);
    }

    /// Sets the length: cutting drops whole pages and zeroes the tail of the
    /// last one; extending only changes `len` (the new bytes read as zeros).
    pub(crate) fn set_len(&mut self, unit: u64, len: u64) {
        self.touch();
        if len < self.len {
            let keep = len.div_ceil(unit);
            let _ = self.pages.split_off(&keep);
            if len % unit != 0 {
                if let Some(page) = self.pages.get_mut(&(len / unit)) {
                    page[(len % unit) as usize..].fill(0);
                }
            }
        }
        self.len = len;
    }

    /// The page at `idx`, if it holds data.
    pub(crate) fn page(&self, idx: u64) -> Option<&[u8]> {
        self.pages.get(&idx).map(|p| &p[..])
    }

    /// The page at `idx`, created zeroed if missing.
    pub(crate) fn page_mut(&mut self, unit: u64, idx: u64) -> &mut [u8] {
        self.touch();
        self.pages
            .entry(idx)
            .or_insert_with(|| vec![0u8; unit as usize].into_boxed_slice())
    }

    /// Replaces page `idx` with `src` (None: zeros), keeping the invariant:
    /// nothing is stored at or past `len`.
    pub(crate) fn put_page(&mut self, unit: u64, idx: u64, src: Option<&[u8]>) {
        self.touch();
        let start = idx.saturating_mul(unit);
        if start >= self.len {
            self.pages.remove(&idx);
            return;
        }
        match src {
            None => {
                self.pages.remove(&idx);
            }
            Some(bytes) => {
                let valid = (self.len - start).min(unit) as usize;
                let page = self.page_mut(unit, idx);
                let n = valid.min(bytes.len());
                page[..n].copy_from_slice(&bytes[..n]);
                page[n..].fill(0);
            }
        }
    }

    /// The whole image as one vector (`len` bytes).
    pub(crate) fn to_vec(&self, unit: u64) -> Vec<u8> {
        let mut v = vec![0u8; self.len as usize];
        let n = self.read(unit, 0, &mut v);
        v.truncate(n);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holes_and_tails_read_as_zero() {
        let mut im = Image::default();
        im.write(4, 6, b"abcd");
        assert_eq!(im.len, 10);
        assert_eq!(im.to_vec(4), b"\0\0\0\0\0\0abcd");
        im.set_len(4, 7);
        im.set_len(4, 12);
        assert_eq!(im.to_vec(4), b"\0\0\0\0\0\0a\0\0\0\0\0");
        let mut buf = [9u8; 4];
        assert_eq!(im.read(4, 11, &mut buf), 1);
        assert_eq!(im.read(4, 12, &mut buf), 0);
    }

    #[test]
    fn put_page_respects_len() {
        let mut im = Image::default();
        im.set_len(4, 6);
        im.put_page(4, 1, Some(b"wxyz"));
        assert_eq!(im.to_vec(4), b"\0\0\0\0wx");
        im.put_page(4, 2, Some(b"wxyz"));
        assert_eq!(im.page(2), None);
        im.set_len(4, 8);
        assert_eq!(im.to_vec(4), b"\0\0\0\0wx\0\0");
    }
}

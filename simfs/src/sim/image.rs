//! [`Image`]: the bytes of one file, stored sparsely in pages of the device's
//! atomic write unit. Used twice per inode: the durable image (what a power
//! loss reveals) and the volatile image (the page cache, what reads see).
//!
//! Invariant: no page lies wholly at or past `len`, and the bytes of the last
//! page past `len` are zero, so extending the file reads zeros. Memory is
//! proportional to the non-zero pages written, not to the length: a hole, a
//! `set_len` extension or a page written with zeros costs nothing.
//!
//! Pages are shared copy-on-write: a sync that makes a page durable, or a
//! power loss that makes the page cache the durable image again, shares the
//! page between the two images instead of copying it, and the first write
//! to a shared page copies it. Only the bytes are the model: whether a page
//! is stored, shared or absent (zeros) never changes what any read returns.

use std::collections::btree_map::Entry;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::state::MAX_UNIT;

/// Source of content versions: unique across every image of every SimFs in
/// the process, so equal versions mean equal content even after an image
/// is replaced by a clone of another. Only compared for equality by
/// inspection callers (a cache); never part of the simulation.
static VERSIONS: AtomicU64 = AtomicU64::new(1);

/// A version no image had before.
fn next_version() -> u64 {
    VERSIONS.fetch_add(1, Ordering::Relaxed)
}

/// Zeros to start a new page from (the largest atomic write unit).
static ZEROS: [u8; MAX_UNIT as usize] = [0; MAX_UNIT as usize];

/// One page: `unit` bytes, shared copy-on-write between images.
pub(crate) type Page = Arc<[u8]>;

/// Whether every byte is zero (compared with [`ZEROS`], a block at a time).
fn is_zero(bytes: &[u8]) -> bool {
    bytes.chunks(ZEROS.len()).all(|c| c == &ZEROS[..c.len()])
}

/// A new page of `unit` zeros.
fn zero_page(unit: usize) -> Page {
    match ZEROS.get(..unit) {
        Some(z) => Arc::from(z),
        None => Arc::from(vec![0u8; unit]),
    }
}

/// Whether two pages (`None`: zeros) hold the same bytes.
fn same_page(a: Option<&Page>, b: Option<&Page>) -> bool {
    match (a, b) {
        (Some(x), Some(y)) => Arc::ptr_eq(x, y) || x == y,
        (Some(x), None) | (None, Some(x)) => is_zero(x),
        (None, None) => true,
    }
}

/// A sparse byte image of one file.
#[derive(Clone, Debug, Default)]
pub(crate) struct Image {
    /// The length in bytes. Changed only through the methods below.
    pub(crate) len: u64,
    /// Page index -> page bytes (`unit` bytes each). A missing page is zeros.
    pages: BTreeMap<u64, Page>,
    /// Changes (to a value no image had before) on every change of the
    /// content; 0 for an image never written.
    version: u64,
}

/// Equal content: the same length and the same bytes (however stored).
impl PartialEq for Image {
    fn eq(&self, other: &Image) -> bool {
        self.len == other.len
            && self
                .pages
                .keys()
                .chain(other.pages.keys())
                .all(|idx| same_page(self.pages.get(idx), other.pages.get(idx)))
    }
}

impl Eq for Image {}

impl Image {
    /// The content version: equal versions mean equal content.
    pub(crate) fn version(&self) -> u64 {
        self.version
    }

    fn touch(&mut self) {
        self.version = next_version();
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
        let u = unit as usize;
        let mut done = 0usize;
        while done < data.len() {
            let pos = offset + done as u64;
            let idx = pos / unit;
            let in_page = (pos % unit) as usize;
            let take = (u - in_page).min(data.len() - done);
            let chunk = &data[done..done + take];
            if take == u {
                // A whole page: replaced (zeros are not stored).
                if is_zero(chunk) {
                    self.pages.remove(&idx);
                } else {
                    match self.pages.entry(idx) {
                        Entry::Occupied(mut e) => match Arc::get_mut(e.get_mut()) {
                            Some(own) => own.copy_from_slice(chunk),
                            None => {
                                e.insert(Arc::from(chunk));
                            }
                        },
                        Entry::Vacant(e) => {
                            e.insert(Arc::from(chunk));
                        }
                    }
                }
            } else {
                match self.pages.entry(idx) {
                    Entry::Occupied(mut e) => {
                        Arc::make_mut(e.get_mut())[in_page..in_page + take].copy_from_slice(chunk);
                    }
                    // Zeros into a page of zeros change nothing.
                    Entry::Vacant(_) if is_zero(chunk) => {}
                    Entry::Vacant(e) => {
                        let mut page = zero_page(u);
                        Arc::make_mut(&mut page)[in_page..in_page + take].copy_from_slice(chunk);
                        e.insert(page);
                    }
                }
            }
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
                    let tail = (len % unit) as usize;
                    if !is_zero(&page[tail..]) {
                        Arc::make_mut(page)[tail..].fill(0);
                    }
                }
            }
        }
        self.len = len;
    }

    /// The page at `idx`, if one is stored (a missing page is zeros).
    pub(crate) fn page(&self, idx: u64) -> Option<&Page> {
        self.pages.get(&idx)
    }

    /// The page at `idx` for writing, created zeroed if missing (copied
    /// first if shared).
    pub(crate) fn page_mut(&mut self, unit: u64, idx: u64) -> &mut [u8] {
        self.touch();
        Arc::make_mut(self.pages.entry(idx).or_insert_with(|| zero_page(unit as usize)))
    }

    /// Replaces page `idx` with the bytes of `src` (None: zeros), keeping the
    /// invariant: nothing is stored at or past `len`, and bytes past `len`
    /// are zero. `src` is shared when it can be as it is (this image then
    /// holds the same bytes), else copied.
    pub(crate) fn put_page(&mut self, unit: u64, idx: u64, src: Option<&Page>) {
        let start = idx.saturating_mul(unit);
        let src = src.filter(|_| start < self.len);
        let Some(src) = src else {
            // Zeros (or nothing may be stored there): only a stored page
            // changes anything.
            if self.pages.remove(&idx).is_some() {
                self.touch();
            }
            return;
        };
        let valid = ((self.len - start).min(unit) as usize).min(src.len());
        if src.len() == unit as usize && is_zero(&src[valid..]) {
            match self.pages.entry(idx) {
                Entry::Occupied(mut e) => {
                    let own = e.get_mut();
                    if !Arc::ptr_eq(own, src) {
                        self.version = next_version();
                        match Arc::get_mut(own) {
                            // This image's own page: overwritten in place
                            // (neither image then has to copy on its next write).
                            Some(bytes) => bytes.copy_from_slice(src),
                            None => *own = Arc::clone(src),
                        }
                    }
                }
                Entry::Vacant(e) => {
                    e.insert(Arc::clone(src));
                    self.version = next_version();
                }
            }
        } else {
            self.touch();
            let page = Arc::make_mut(self.pages.entry(idx).or_insert_with(|| zero_page(unit as usize)));
            page[..valid].copy_from_slice(&src[..valid]);
            page[valid..].fill(0);
        }
    }

    /// The whole image as one vector (`len` bytes).
    pub(crate) fn to_vec(&self, unit: u64) -> Vec<u8> {
        let len = self.len as usize;
        let mut v = Vec::with_capacity(len);
        for (&idx, page) in &self.pages {
            let start = idx.saturating_mul(unit) as usize;
            if start >= len {
                break;
            }
            v.resize(start, 0);
            v.extend_from_slice(&page[..(len - start).min(page.len())]);
        }
        v.resize(len, 0);
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
        let src: Page = Arc::from(&b"wxyz"[..]);
        im.set_len(4, 6);
        im.put_page(4, 1, Some(&src));
        assert_eq!(im.to_vec(4), b"\0\0\0\0wx");
        im.put_page(4, 2, Some(&src));
        assert_eq!(im.page(2), None);
        im.set_len(4, 8);
        assert_eq!(im.to_vec(4), b"\0\0\0\0wx\0\0");
        assert_eq!(&src[..], b"wxyz", "the source is never changed");
    }

    #[test]
    fn shared_pages_copy_on_write() {
        let (mut vol, mut dur) = (Image::default(), Image::default());
        vol.write(4, 0, b"abcdefgh");
        dur.set_len(4, 8);
        dur.put_page(4, 1, vol.page(1));
        assert!(
            Arc::ptr_eq(vol.page(1).unwrap(), dur.page(1).unwrap()),
            "shared, not copied"
        );
        vol.write(4, 5, b"X");
        dur.page_mut(4, 1)[2] = b'Y';
        assert_eq!(vol.to_vec(4), b"abcdeXgh");
        assert_eq!(dur.to_vec(4), b"\0\0\0\0efYh");
        // Into a page of its own: copied in place.
        dur.put_page(4, 1, vol.page(1));
        assert!(!Arc::ptr_eq(vol.page(1).unwrap(), dur.page(1).unwrap()));
        assert_eq!(dur.to_vec(4), b"\0\0\0\0eXgh");
        let copy = vol.clone();
        vol.set_len(4, 6);
        assert_eq!(copy.to_vec(4), b"abcdeXgh");
        assert_eq!(vol.to_vec(4), b"abcdeX");
    }

    #[test]
    fn zero_pages_are_not_stored_and_compare_as_zeros() {
        let mut a = Image::default();
        a.write(4, 0, &[0; 12]);
        assert_eq!((a.len, a.page(0), a.page(2)), (12, None, None));
        a.write(4, 5, b"q");
        a.write(4, 8, b"\0\0");
        assert_eq!(a.page(2), None, "zeros into a hole");
        assert_eq!(a.to_vec(4), b"\0\0\0\0\0q\0\0\0\0\0\0");
        let mut b = Image::default();
        b.set_len(4, 12);
        b.write(4, 4, b"\0q\0\0");
        assert!(a == b);
        b.write(4, 4, &[0; 4]);
        assert_eq!(b.page(1), None, "a whole page of zeros drops the page");
        assert!(a != b);
    }
}

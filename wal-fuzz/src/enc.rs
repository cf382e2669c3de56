//! The inverse of `#[derive(Arbitrary)]` (arbitrary 1.x) for the input types
//! of the structured targets, so that meaningful seed inputs can be written
//! as values and turned into the bytes libFuzzer mutates.
//!
//! The layout `arbitrary` reads (with `T::arbitrary`, not `take_rest`):
//! integers little-endian (missing bytes read as zero); `bool` one byte, odd =
//! true; an enum a `u32` tag `t` choosing variant `(t * count) >> 32`, then its
//! fields; a struct its fields in order; a `Vec` one "continue" `bool` before
//! each element and a false one after the last. `tests/seeds.rs` checks that
//! every seed decodes back to the value it was encoded from.

/// Bytes being built in the layout `arbitrary` reads.
#[derive(Default, Debug)]
pub struct Enc {
    /// The bytes so far.
    pub out: Vec<u8>,
}

/// A value that can be written in `arbitrary`'s layout.
pub trait Encode {
    /// Appends the encoding of `self`.
    fn encode(&self, e: &mut Enc);
}

impl Enc {
    /// Encodes one value into fresh bytes.
    pub fn to_bytes<T: Encode>(value: &T) -> Vec<u8> {
        let mut e = Enc::default();
        value.encode(&mut e);
        e.out
    }

    /// An enum tag choosing variant `index` of `count`.
    pub fn tag(&mut self, index: u32, count: u32) {
        // The smallest t with (t * count) >> 32 == index.
        let t = ((u64::from(index) << 32).div_ceil(u64::from(count))) as u32;
        self.out.extend_from_slice(&t.to_le_bytes());
    }
}

macro_rules! encode_int {
    ($($t:ty),*) => {$(
        impl Encode for $t {
            fn encode(&self, e: &mut Enc) {
                e.out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
encode_int!(u8, u16, u32, u64, i8);

impl Encode for bool {
    fn encode(&self, e: &mut Enc) {
        e.out.push(u8::from(*self));
    }
}

impl<T: Encode> Encode for Vec<T> {
    fn encode(&self, e: &mut Enc) {
        for x in self {
            e.out.push(1);
            x.encode(e);
        }
        e.out.push(0);
    }
}

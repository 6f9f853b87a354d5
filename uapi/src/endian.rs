//! Byte-order newtypes: a field stored in a fixed byte order on the wire.
//!
//! Each type holds the raw in-memory representation; `get` converts to host order and
//! `new` converts from it. There is no `Deref` or `From<u32>`, so a big-endian field can
//! never be used as a number by accident.

use bytemuck::{Pod, Zeroable};
use static_assertions::{assert_eq_align, assert_eq_size};

macro_rules! endian_type {
    ($(#[$doc:meta])* $name:ident, $int:ty, $to:ident, $from:ident) => {
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(Clone, Copy, Default, PartialEq, Eq, Hash, Pod, Zeroable)]
        pub struct $name($int);

        impl $name {
            /// Stores a host-order value in this byte order.
            #[inline(always)]
            pub const fn new(v: $int) -> Self {
                Self(<$int>::$to(v))
            }

            /// The value in host order.
            #[inline(always)]
            pub const fn get(self) -> $int {
                <$int>::$from(self.0)
            }

            /// The raw in-memory representation, reinterpreted as a host integer without
            /// any byte swap (what C code sees when it copies a `__be32` into a `uint32_t`).
            #[inline(always)]
            pub const fn raw(self) -> $int {
                self.0
            }

            /// Builds the value from its raw in-memory representation.
            #[inline(always)]
            pub const fn from_raw(raw: $int) -> Self {
                Self(raw)
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                write!(f, "{:#x}", self.get())
            }
        }

        assert_eq_size!($name, $int);
        assert_eq_align!($name, $int);
    };
}

endian_type!(
    /// A big-endian 16-bit field (`__be16`).
    Be16, u16, to_be, from_be
);
endian_type!(
    /// A big-endian 32-bit field (`__be32`).
    Be32, u32, to_be, from_be
);
endian_type!(
    /// A big-endian 64-bit field (`__be64`).
    Be64, u64, to_be, from_be
);
endian_type!(
    /// A little-endian 16-bit field (`__le16`).
    Le16, u16, to_le, from_le
);
endian_type!(
    /// A little-endian 32-bit field (`__le32`).
    Le32, u32, to_le, from_le
);
endian_type!(
    /// A little-endian 64-bit field (`__le64`).
    Le64, u64, to_le, from_le
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn big_endian_bytes_are_in_network_order() {
        let v = Be32::new(0x1122_3344);
        assert_eq!(bytemuck::bytes_of(&v), &[0x11, 0x22, 0x33, 0x44]);
        assert_eq!(v.get(), 0x1122_3344);
        let w = Be16::new(0xabcd);
        assert_eq!(bytemuck::bytes_of(&w), &[0xab, 0xcd]);
    }

    #[test]
    fn little_endian_bytes_are_in_host_little_order() {
        let v = Le64::new(0x0102_0304_0506_0708);
        assert_eq!(bytemuck::bytes_of(&v), &[8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(v.get(), 0x0102_0304_0506_0708);
    }

    #[test]
    fn raw_is_memory_order_reinterpreted() {
        let v = Be32::new(0x1122_3344);
        assert_eq!(v.raw(), u32::from_ne_bytes([0x11, 0x22, 0x33, 0x44]));
        assert_eq!(Be32::from_raw(v.raw()), v);
    }
}

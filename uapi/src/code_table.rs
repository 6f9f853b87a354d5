//! The macro behind every table of numeric codes: constants and their C names from one list.

/// Defines a table of numeric codes inside a module: one constant per code, documented with
/// the C identifier (`$prefix` followed by the constant's name); `ALL`, every code in the
/// order listed; and `name`, which gives a code's C identifier back. Name and value cannot
/// disagree, and a value given twice fails to build (an unreachable pattern in `name`).
macro_rules! code_table {
    ($ty:ty, $prefix:literal, $($(#[$doc:meta])* $name:ident = $value:literal;)+) => {
        $(
            #[doc = concat!("`", $prefix, stringify!($name), "`.")]
            $(#[$doc])*
            pub const $name: $ty = $value;
        )+

        /// Every code of this table, in the order listed.
        pub const ALL: [$ty; <[&str]>::len(&[$(stringify!($name)),+])] = [$($name),+];

        /// The C identifier of a code, or `None` for a code not in this table.
        #[deny(unreachable_patterns)]
        pub const fn name(code: $ty) -> Option<&'static str> {
            match code {
                $($name => Some(concat!($prefix, stringify!($name))),)+
                _ => None,
            }
        }
    };
}

//! The bindgen output for `infiniband/verbs.h` and `infiniband/mlx5dv.h` (see build.rs for
//! the allowlists), with bindgen's own layout tests.
#![allow(non_upper_case_globals, non_camel_case_types, non_snake_case, dead_code, missing_docs)]
#![allow(clippy::all, clippy::undocumented_unsafe_blocks, unsafe_op_in_unsafe_fn)]

include!(concat!(env!("OUT_DIR"), "/verbs.rs"));

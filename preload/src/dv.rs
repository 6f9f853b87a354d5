//! `mlx5dv_init_obj`: a program that asks for a CQ's or a QP's raw buffers is about to read
//! that CQ's ring itself, or to post to that QP's queues itself (UCX's `rc_mlx5` does
//! both), behind rdma-core's and dvcq's back. dvcq hands every such CQ back to the provider
//! first, so that one poller, the program's, reads it: the CQ leaves the preload's table
//! (its polls and arms go to the provider's ops again, an extended one gets the provider's
//! `start_poll` ... back), and the mlx5 backend clears the direct-verbs mark its attach
//! set, which rdma-core's `mlx5dv_init_obj` then sets again for the program. Said once per
//! CQ, and in the exit report.

use crate::cq;
use crate::layout::{IbvCq, IbvQp};
use crate::real::{self, call_real};
use crate::{lock, mode, Inside, Mode};
use core::ffi::{c_int, c_void};
use static_assertions::const_assert_eq;

/// `MLX5DV_OBJ_QP`.
const OBJ_QP: u64 = 1 << 0;
/// `MLX5DV_OBJ_CQ`.
const OBJ_CQ: u64 = 1 << 1;

/// `struct mlx5dv_obj` up to its CQ: `{ in, out }` pairs, the QP's first.
#[repr(C)]
struct Mlx5dvObj {
    qp_in: *mut IbvQp,
    qp_out: *mut c_void,
    cq_in: *mut IbvCq,
    cq_out: *mut c_void,
}

const_assert_eq!(core::mem::offset_of!(Mlx5dvObj, cq_in), 16);

/// Hands `raw` back to the provider, if dvcq took it.
fn hand_back(raw: *mut IbvCq, why: &str) {
    if raw.is_null() {
        return;
    }
    let Some(e) = cq::hand_back(raw, why) else { return };
    let _in = Inside::enter();
    let mut p = lock(&e.polled);
    crate::ext::forget(raw);
    if let Some(s) = e.ext {
        // SAFETY: the application's live extended CQ these pointers were read from; it asks for the ring outside any poll of it (a poll holds the lock taken above).
        unsafe { crate::ext::restore(raw, &s) };
    }
    let polled = e.completions.load(std::sync::atomic::Ordering::Relaxed);
    let note = if e.mode == Mode::Own && polled > 0 {
        format!(
            " after dvcq polled {polled} of its completions (rdma-core's own consumer index, which a later ibv_poll_cq or arm of the provider reads, stayed behind)"
        )
    } else {
        String::new()
    };
    crate::log::once(format!("cq {}: handed back to the provider{note}: {why}", e.serial));
    if let Some(c) = p.cq.take() {
        c.give_back();
    }
    drop(p);
    drop(e);
}

/// `mlx5dv_init_obj`: the CQs it names (the CQ asked for, the CQs of the QP asked for) are
/// handed back to the provider first; then libmlx5's.
///
/// # Safety
///
/// As `mlx5dv_init_obj`.
#[no_mangle]
pub unsafe extern "C" fn mlx5dv_init_obj(obj: *mut c_void, obj_type: u64) -> c_int {
    type F = unsafe extern "C" fn(*mut c_void, u64) -> c_int;
    if !obj.is_null() && !Inside::active() && mode() != Mode::Off {
        let o = obj.cast::<Mlx5dvObj>();
        if obj_type & OBJ_CQ != 0 {
            // SAFETY: the caller's object names a live CQ when it asks for one.
            hand_back(unsafe { (*o).cq_in }, "the program asked for its ring (mlx5dv_init_obj) and polls it itself");
        }
        if obj_type & OBJ_QP != 0 {
            // SAFETY: the caller's object names a live QP when it asks for one.
            let qp = unsafe { (*o).qp_in };
            if !qp.is_null() {
                // SAFETY: as above; public fields.
                let (s, r) = unsafe { ((*qp).send_cq, (*qp).recv_cq) };
                let why =
                    "the program asked for the raw queues of one of its QPs (mlx5dv_init_obj) and posts to them itself";
                hand_back(s, why);
                if r != s {
                    hand_back(r, why);
                }
            }
        }
    }
    call_real!(real::MLX5DV_INIT_OBJ, F, libc::EOPNOTSUPP, (obj, obj_type))
}

//! The C functions called as C calls them, on the models.

use crate::*;
use core::ffi::{c_char, CStr};
use core::ptr::{null, null_mut, NonNull};

fn last_error() -> String {
    // SAFETY: dvcq_last_error returns this thread's NUL-terminated message.
    unsafe { CStr::from_ptr(dvcq_last_error()) }.to_string_lossy().into_owned()
}

/// A model context, a CQ of `depth`, a PD and a 4 KiB region.
struct Rig {
    ctx: *mut dvcq_context,
    cq: *mut dvcq_cq,
    pd: *mut dvcq_pd,
    mr: *mut dvcq_mr,
}

impl Rig {
    fn new(model: &CStr, depth: u32) -> Rig {
        let (mut ctx, mut cq, mut pd, mut mr) = (null_mut(), null_mut(), null_mut(), null_mut());
        // SAFETY: a NUL-terminated name and writable out-parameters, as each call asks; the handles come from the calls before.
        unsafe {
            assert_eq!(dvcq_context_open(model.as_ptr(), &mut ctx), 0, "{}", last_error());
            assert_eq!(dvcq_cq_create(ctx, depth, null(), &mut cq), 0, "{}", last_error());
            assert_eq!(dvcq_pd_alloc(ctx, &mut pd), 0, "{}", last_error());
            assert_eq!(dvcq_mr_reg(pd, 4096, &mut mr), 0, "{}", last_error());
        }
        Rig { ctx, cq, pd, mr }
    }

    /// An RC QP on the CQ connected to itself.
    fn qp(&self) -> *mut dvcq_qp {
        let mut qp = null_mut();
        // SAFETY: live handles of this rig; a writable out-parameter.
        unsafe {
            assert_eq!(dvcq_qp_create_rc(self.pd, self.cq, &mut qp), 0, "{}", last_error());
            assert_eq!(dvcq_qp_connect(qp, qp), 0, "{}", last_error());
        }
        qp
    }

    fn write(&self, qp: *mut dvcq_qp, wr_id: u64) {
        // SAFETY: live handles of this rig.
        let rc = unsafe { dvcq_qp_post_write(qp, wr_id, self.mr, 0, 8, self.mr, 64) };
        assert_eq!(rc, 0, "{}", last_error());
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        // SAFETY: the rig's live handles, each given back once.
        unsafe {
            assert_eq!(dvcq_mr_dereg(self.mr), 0);
            assert_eq!(dvcq_pd_free(self.pd), 0);
            assert_eq!(dvcq_cq_destroy(self.cq), 0);
            assert_eq!(dvcq_context_close(self.ctx), 0);
        }
    }
}

#[test]
fn poll_has_ibv_poll_cq_semantics_over_batches_larger_than_the_staging_buffer() {
    for model in [c"model-mlx5", c"model-e810"] {
        let rig = Rig::new(model, 256);
        let (a, b) = (rig.qp(), rig.qp());
        for k in 0..60u64 {
            rig.write(a, k);
            rig.write(b, 1000 + k);
        }
        let mut wc = vec![dvcq_wc::default(); 200];
        // SAFETY: a live CQ and 200 writable entries.
        let n = unsafe { dvcq_cq_poll(rig.cq, 200, wc.as_mut_ptr()) };
        assert_eq!(n, 120, "{model:?}: every completion, past the 64 of one staging batch: {}", last_error());
        let ids: Vec<u64> = wc[..120].iter().map(|w| w.wr_id).collect();
        let want: Vec<u64> = (0..60u64).flat_map(|k| [k, 1000 + k]).collect();
        assert_eq!(ids, want, "{model:?}: in order");
        assert!(wc[..120].iter().all(|w| w.status == DVCQ_WC_SUCCESS && w.opcode == DVCQ_WC_RDMA_WRITE));
        // SAFETY: as above; then an empty CQ, a zero count with no array.
        unsafe {
            assert_eq!(dvcq_cq_poll(rig.cq, 200, wc.as_mut_ptr()), 0);
            assert_eq!(dvcq_cq_poll(rig.cq, 0, null_mut()), 0);
        }
        let mut st = dvcq_cq_stats::default();
        // SAFETY: a live CQ and a whole stats struct.
        assert_eq!(unsafe { dvcq_cq_stats(rig.cq, &mut st, core::mem::size_of::<dvcq_cq_stats>()) }, 0);
        assert_eq!((st.completions, st.errors, st.faults), (120, 0, 0), "{model:?}");
        // SAFETY: live QPs, destroyed once.
        unsafe { assert_eq!(dvcq_qp_destroy(a) + dvcq_qp_destroy(b), 0) };
    }
}

#[test]
fn bad_arguments_are_einval_with_a_message_never_a_crash() {
    let rig = Rig::new(c"model-mlx5", 16);
    let mut wc = [dvcq_wc::default(); 4];
    // SAFETY: each call gets a NULL or wrong argument the API promises to refuse.
    unsafe {
        assert_eq!(dvcq_cq_poll(null_mut(), 4, wc.as_mut_ptr()), -libc::EINVAL);
        assert_eq!(last_error(), "dvcq_cq_poll: the struct dvcq_cq is NULL");
        assert_eq!(dvcq_cq_poll(rig.cq, -1, wc.as_mut_ptr()), -libc::EINVAL);
        assert!(last_error().contains("num_entries is -1"), "{}", last_error());
        assert_eq!(dvcq_cq_poll(rig.cq, 4, null_mut()), -libc::EINVAL);
        assert!(last_error().contains("the array is NULL"), "{}", last_error());
        let misaligned = wc.as_mut_ptr().cast::<u8>().add(4).cast::<dvcq_wc>();
        assert_eq!(dvcq_cq_poll(rig.cq, 1, misaligned), -libc::EINVAL);
        assert!(last_error().contains("is not aligned"), "{}", last_error());
        // A handle of another type.
        assert_eq!(dvcq_cq_poll(rig.mr.cast(), 4, wc.as_mut_ptr()), -libc::EINVAL);
        assert!(last_error().contains("is not a live struct dvcq_cq"), "{}", last_error());
        // A made CQ is destroyed, not detached.
        assert_eq!(dvcq_cq_detach(rig.cq), -libc::EINVAL);
        assert!(last_error().contains("destroy it with dvcq_cq_destroy"), "{}", last_error());
        // Objects are named to and taken from attached CQs only, and never as NULL.
        let fake = NonNull::<u64>::dangling().as_ptr();
        assert_eq!(dvcq_cq_attach_wq(rig.cq, fake.cast()), -libc::EINVAL);
        assert!(last_error().starts_with("dvcq_cq_attach_wq: this CQ was made by dvcq"), "{}", last_error());
        assert_eq!(dvcq_cq_detach_qp(rig.cq, fake.cast()), -libc::EINVAL);
        assert!(last_error().starts_with("dvcq_cq_detach_qp: this CQ was made by dvcq"), "{}", last_error());
        assert_eq!(dvcq_cq_detach_wq(rig.cq, null_mut()), -libc::EINVAL);
        assert_eq!(last_error(), "dvcq_cq_detach_wq: ibv_wq is NULL");
        assert_eq!(dvcq_cq_detach_srq(null_mut(), fake.cast()), -libc::EINVAL);
        assert_eq!(last_error(), "dvcq_cq_detach_srq: the struct dvcq_cq is NULL");
        let mut out = null_mut();
        assert_eq!(
            dvcq_context_open(c"model-x".as_ptr(), &mut out),
            if crate::dvcq_has_rdma_core() == 1 { -libc::ENODEV } else { -libc::EOPNOTSUPP }
        );
        assert!(out.is_null());
        assert_eq!(dvcq_context_open(null(), &mut out), -libc::EINVAL);
        assert_eq!(dvcq_mr_write(rig.mr, 4090, c"12345678".as_ptr().cast(), 8), -libc::EINVAL, "past the region's end");
        assert_eq!(dvcq_cq_create(rig.ctx, 0, null(), &mut out.cast()), -libc::EINVAL, "depth 0");
    }
}

#[test]
fn a_second_thread_inside_a_call_on_the_same_cq_gets_ebusy() {
    let rig = Rig::new(c"model-mlx5", 16);
    // SAFETY: a live CQ handle of this test.
    let h = unsafe { &*rig.cq };
    let held = h.state.lock().unwrap();
    let cq = rig.cq as usize;
    let rc = std::thread::spawn(move || {
        let mut wc = [dvcq_wc::default(); 1];
        // SAFETY: a live CQ (the test holds it) and one writable entry.
        unsafe { dvcq_cq_poll(cq as *mut dvcq_cq, 1, wc.as_mut_ptr()) }
    })
    .join()
    .unwrap();
    drop(held);
    assert_eq!(rc, -libc::EBUSY);
}

#[test]
fn stats_and_reason_copy_only_what_the_caller_has_room_for() {
    let rig = Rig::new(c"model-e810", 16);
    let mut st = dvcq_cq_stats { empty_polls: 77, ..dvcq_cq_stats::default() };
    let mut wc = [dvcq_wc::default(); 1];
    let mut buf = [0x7f as c_char; 8];
    // SAFETY: a live CQ; `st` has at least the 8 bytes passed; `buf` has 8 bytes.
    unsafe {
        assert_eq!(dvcq_cq_poll(rig.cq, 1, wc.as_mut_ptr()), 0);
        assert_eq!(dvcq_cq_stats(rig.cq, &mut st, 8), 0);
        assert_eq!((st.polls, st.empty_polls), (1, 77), "only the first field was written");
        let len = dvcq_cq_backend_reason(rig.cq, buf.as_mut_ptr(), buf.len());
        assert_eq!(CStr::from_ptr(buf.as_ptr()).to_str().unwrap(), "dvcq's ", "cut to 7 bytes and a NUL");
        assert_eq!(len as usize, "dvcq's irdma poller on the model's E810 CQ ring".len());
        assert_eq!(dvcq_cq_backend(rig.cq), DVCQ_BACKEND_MODEL);
        assert_eq!(CStr::from_ptr(dvcq_backend_name(DVCQ_BACKEND_MODEL)).to_str().unwrap(), "model");
    }
}

#[test]
fn attach_refuses_a_model_context_with_or_without_rdma_core() {
    let rig = Rig::new(c"model-mlx5", 16);
    let mut cq = null_mut();
    // A pointer the refusal never reads: a model context has no rdma-core CQ to attach.
    let fake = core::ptr::NonNull::<ibv_cq>::dangling().as_ptr();
    // SAFETY: a live context; `fake` is refused before any use.
    let rc = unsafe { dvcq_cq_attach(rig.ctx, fake, DVCQ_ATTACH_AUTO, &mut cq) };
    assert_eq!(rc, -libc::EINVAL, "{}", last_error());
    assert!(last_error().contains("a model context has no rdma-core CQs to attach"), "{}", last_error());
    assert!(cq.is_null());
    // SAFETY: a live context; NULL and a bad flag are refused first.
    unsafe {
        assert_eq!(dvcq_cq_attach(rig.ctx, fake, 9, &mut cq), -libc::EINVAL);
        assert!(last_error().contains("flags 0x9"), "{}", last_error());
    }
}

/// Where rdma-core cannot be loaded (`DVCQ_NO_RDMA_CORE=1`, as CI's run without rdma-core
/// sets), adopting an application's context fails with `-EOPNOTSUPP` and says what to
/// install; where it can, `dvcq_has_rdma_core` says so (and the adoption itself needs a
/// real context, which the device tests make).
#[test]
fn adopting_a_context_without_rdma_core_says_what_to_install() {
    let absent = std::env::var_os("DVCQ_NO_RDMA_CORE").is_some_and(|v| v == "1");
    assert_eq!(dvcq_has_rdma_core(), i32::from(!absent && dvcq::device::rdma_core_available()));
    if dvcq_has_rdma_core() == 1 {
        return;
    }
    let mut ctx = null_mut();
    // A pointer never read: the call fails before it looks, rdma-core being absent.
    let fake = core::ptr::NonNull::<ibv_context>::dangling().as_ptr();
    // SAFETY: `out` is writable; `fake` is not used where rdma-core cannot be loaded.
    let rc = unsafe { dvcq_context_from_ibv(fake, &mut ctx) };
    assert_eq!(rc, -libc::EOPNOTSUPP, "{}", last_error());
    assert!(ctx.is_null());
    let msg = last_error();
    assert!(
        msg.contains("dvcq_context_from_ibv") && msg.contains("apt-get install libibverbs1 ibverbs-providers"),
        "{msg}"
    );
}

#[test]
fn wait_on_a_model_channel_wakes_for_a_completion_and_times_out_without_one() {
    let mut ctx = null_mut();
    let (mut ch, mut cq, mut pd, mut mr, mut qp) = (null_mut(), null_mut(), null_mut(), null_mut(), null_mut());
    let mut wc = [dvcq_wc::default(); 4];
    // SAFETY: every handle comes from the call before; out-parameters are writable.
    unsafe {
        assert_eq!(dvcq_context_open(c"model-mlx5".as_ptr(), &mut ctx), 0);
        assert_eq!(dvcq_channel_create(ctx, &mut ch), 0);
        assert!(dvcq_channel_fd(ch) >= 0);
        assert_eq!(dvcq_cq_create(ctx, 16, ch, &mut cq), 0);
        assert_eq!(dvcq_cq_wait(cq, 4, wc.as_mut_ptr(), 20), 0, "nothing to wait for: the timeout");
        assert_eq!(dvcq_pd_alloc(ctx, &mut pd), 0);
        assert_eq!(dvcq_mr_reg(pd, 4096, &mut mr), 0);
        assert_eq!(dvcq_qp_create_rc(pd, cq, &mut qp), 0);
        assert_eq!(dvcq_qp_connect(qp, qp), 0);
        assert_eq!(dvcq_cq_arm(cq, 0), 0);
        assert_eq!(dvcq_qp_post_write(qp, 3, mr, 0, 8, mr, 8), 0);
        let mut id = 0;
        assert_eq!(dvcq_channel_get_event(ch, 1000, &mut id), DVCQ_EVENT_COMPLETION, "{}", last_error());
        assert_eq!(id, dvcq_cq_id(cq));
        assert_eq!(dvcq_cq_wait(cq, 4, wc.as_mut_ptr(), 1000), 1, "{}", last_error());
        assert_eq!(wc[0].wr_id, 3);
        assert_eq!(dvcq_cq_wait(cq, 4, wc.as_mut_ptr(), -2), -libc::EINVAL);
        for rc in [dvcq_qp_destroy(qp), dvcq_mr_dereg(mr), dvcq_pd_free(pd), dvcq_cq_destroy(cq)] {
            assert_eq!(rc, 0);
        }
        assert_eq!(dvcq_channel_destroy(ch) + dvcq_context_close(ctx), 0);
    }
}

#[test]
fn a_post_the_full_send_queue_refuses_is_enomem_and_nothing_polled_is_lost() {
    let rig = Rig::new(c"model-mlx5", 256);
    let qp = rig.qp();
    for k in 0..64 {
        rig.write(qp, k);
    }
    // SAFETY: live handles of this rig.
    let rc = unsafe { dvcq_qp_post_write(qp, 64, rig.mr, 0, 8, rig.mr, 64) };
    assert_eq!(rc, -libc::ENOMEM, "{}", last_error());
    assert!(last_error().starts_with("dvcq_qp_post_write: "), "{}", last_error());
    let mut wc = vec![dvcq_wc::default(); 128];
    // SAFETY: a live CQ and 128 writable entries; then the QP, destroyed once.
    unsafe {
        assert_eq!(dvcq_cq_poll(rig.cq, 128, wc.as_mut_ptr()), 64);
        assert_eq!(dvcq_qp_post_write(qp, 64, rig.mr, 0, 8, rig.mr, 64), 0, "room again after the poll");
        assert_eq!(dvcq_qp_destroy(qp), 0);
    }
}

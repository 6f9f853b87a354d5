//! The mlx5 driver's side of the commands: the context response libmlx5 configures itself
//! from (static UARs, never the zero fields it divides by or sizes with), the checks of its
//! CQ, QP and SRQ udata, and the pages it maps from the command fd.

use crate::mlx5_abi::{self, AllocUcontextReq, AllocUcontextResp, ClockInfo};
use crate::{device, real};

/// `MLX5_DEF_TOT_UUARS`: the static BlueFlame registers a context gets when libmlx5 asks
/// for none.
const DEFAULT_TOT_BFREGS: u32 = 16;
/// `MLX5_NON_FP_BFREGS_PER_UAR`: two BlueFlame registers per UAR page.
const BFREGS_PER_UAR: u32 = 2;
/// The largest static BlueFlame register count (`MLX5_MAX_BFREGS`).
const MAX_BFREGS: u32 = 512;
/// The highest CQE version libmlx5 may ask for and the emulator answers with: version 1
/// puts the user index in every CQE.
const CQE_VERSION: u8 = 1;
/// The mmap page size.
pub const PAGE: usize = 4096;

/// The GET_CONTEXT driver response for `req`: static UARs (`tot_bfregs` echoes the request,
/// never 0, which would send libmlx5 to the ioctl-only dynamic UARs), 64-byte cache lines
/// (libmlx5's doorbell-record allocator divides by it), 512-byte descriptors, the core clock
/// page and the clock-info page on offer.
///
/// # Errors
///
/// `EINVAL` for more BlueFlame registers than a device has, or fewer low-latency ones than
/// asked for.
pub fn ucontext(req: &AllocUcontextReq) -> Result<AllocUcontextResp, i32> {
    let tot = if req.total_num_bfregs == 0 { DEFAULT_TOT_BFREGS } else { req.total_num_bfregs };
    if tot > MAX_BFREGS || req.num_low_latency_bfregs > tot.saturating_sub(1) {
        return Err(libc::EINVAL);
    }
    // The kernel rounds the count up to whole UAR pages.
    let tot = tot.div_ceil(BFREGS_PER_UAR) * BFREGS_PER_UAR;
    Ok(AllocUcontextResp {
        qp_tab_size: device::limits::MAX_QP,
        bf_reg_size: 512,
        tot_bfregs: tot,
        cache_line_size: 64,
        max_sq_desc_sz: 512,
        max_rq_desc_sz: 512,
        max_send_wqebb: device::limits::MAX_QP_WR,
        max_recv_wr: device::limits::MAX_QP_WR,
        max_srq_recv_wr: device::limits::MAX_QP_WR,
        num_ports: 1,
        flow_action_flags: 0,
        comp_mask: mlx5_abi::UCONTEXT_RESP_CORE_CLOCK_OFFSET,
        response_length: size_of::<AllocUcontextResp>() as u32,
        cqe_version: req.max_cqe_version.min(CQE_VERSION),
        cmds_supp_uhw: mlx5_abi::CMDS_SUPP_UHW,
        eth_min_inline: mlx5_abi::ETH_MIN_INLINE_NONE,
        clock_info_versions: mlx5_abi::CLOCK_INFO_V1,
        hca_core_clock_offset: 0,
        // 4 KiB UAR pages, one a page: what an old kernel with static UARs reports.
        log_uar_size: 12,
        num_uars_per_page: 1,
        num_dyn_bfregs: 0,
        dump_fill_mkey: 0,
    })
}

/// How many static UAR pages a context with `tot_bfregs` registers maps.
pub fn uar_pages(tot_bfregs: u32) -> u32 {
    tot_bfregs / BFREGS_PER_UAR
}

/// Whether an mmap of command `cmd`, index `idx`, `len` bytes is one this device serves.
///
/// # Errors
///
/// `EINVAL` for a command the emulator does not serve (contiguous pages, write-combining
/// allocations, device memory) or an index or length out of range.
pub fn check_mmap(cmd: u32, idx: u32, len: usize, tot_bfregs: u32) -> Result<(), i32> {
    use mlx5_abi::mmap_cmd::*;
    let ok = match cmd {
        REGULAR_PAGE | NC_PAGE => idx < uar_pages(tot_bfregs) && len == PAGE,
        CORE_CLOCK | CLOCK_INFO => idx == 0 && len <= PAGE && len > 0,
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(libc::EINVAL)
    }
}

/// The device's free-running cycle counter at 1 GHz: nanoseconds of `CLOCK_MONOTONIC`,
/// kept within `timestamp_mask`.
pub fn cycles_now() -> u64 {
    now(libc::CLOCK_MONOTONIC) & ((1 << 63) - 1)
}

fn now(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}

/// The clock-info snapshot: the cycle counter read now against `CLOCK_REALTIME`, one cycle
/// a nanosecond (`mult >> shift` = 1), sequence word even (no update in progress).
pub fn clock_info() -> ClockInfo {
    const SHIFT: u32 = 24;
    ClockInfo {
        sign: 0,
        resv: 0,
        nsec: now(libc::CLOCK_REALTIME),
        cycles: cycles_now(),
        frac: 0,
        mult: 1 << SHIFT,
        shift: SHIFT,
        mask: (1 << 63) - 1,
        overflow_period: 1 << 38,
    }
}

/// Fills a freshly mapped page of command `cmd`: the clock pages get the clock, UAR pages
/// stay zero (the provider only writes them).
///
/// # Safety
///
/// `addr` is a writable mapping of at least `len` bytes that nothing else uses yet.
pub unsafe fn fill_page(cmd: u32, addr: usize, len: usize) {
    use mlx5_abi::mmap_cmd::*;
    match cmd {
        CORE_CLOCK if len >= 8 => {
            // The core clock as libmlx5 reads it: be32 high word, then be32 low word.
            let c = cycles_now();
            let words = [((c >> 32) as u32).to_be(), (c as u32).to_be()];
            // SAFETY: the caller gives ≥ 8 writable bytes at addr, page-aligned.
            unsafe { std::ptr::copy_nonoverlapping(words.as_ptr().cast::<u8>(), addr as *mut u8, 8) };
        }
        CLOCK_INFO if len >= size_of::<ClockInfo>() => {
            let info = clock_info();
            let bytes = bytemuck::bytes_of(&info);
            // SAFETY: the caller gives ≥ len ≥ size_of::<ClockInfo>() writable bytes at addr.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, bytes.len()) };
        }
        _ => {}
    }
}

/// Maps `len` bytes of anonymous shared memory for a device page.
///
/// # Errors
///
/// The errno of the failed mmap.
pub fn map_page(len: usize) -> Result<usize, i32> {
    // SAFETY: a fresh anonymous mapping at an address of the kernel's choosing touches no existing memory.
    let p = unsafe {
        real::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        Err(real::errno())
    } else {
        Ok(p as usize)
    }
}

/// CQE sizes a CQ may have.
pub fn cqe_size_ok(size: u32) -> bool {
    size == 64 || size == 128
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_has_static_uars_and_no_field_libmlx5_divides_by_is_zero() {
        let req = AllocUcontextReq {
            total_num_bfregs: 16,
            num_low_latency_bfregs: 4,
            max_cqe_version: 1,
            ..Default::default()
        };
        let r = ucontext(&req).unwrap();
        assert_eq!(r.tot_bfregs, 16, "echoes the request: static UARs");
        assert_eq!(r.cache_line_size, 64);
        assert_eq!((r.max_sq_desc_sz, r.max_rq_desc_sz), (512, 512));
        assert!(r.max_send_wqebb > 0 && r.max_recv_wr > 0 && r.max_srq_recv_wr > 0);
        assert_eq!(r.num_ports, 1);
        assert_eq!(r.cqe_version, 1);
        assert_eq!(r.num_dyn_bfregs, 0);
        assert_eq!(uar_pages(r.tot_bfregs), 8);
        // None asked for: the default; an old library asking for CQE version 0 gets 0.
        let r = ucontext(&AllocUcontextReq::default()).unwrap();
        assert_eq!((r.tot_bfregs, r.cqe_version), (16, 0));
        // More low-latency registers than there are: refused.
        let bad = AllocUcontextReq { total_num_bfregs: 4, num_low_latency_bfregs: 4, ..Default::default() };
        assert_eq!(ucontext(&bad).unwrap_err(), libc::EINVAL);
    }

    #[test]
    fn only_the_pages_the_device_has_map() {
        use mlx5_abi::mmap_cmd::*;
        assert!(check_mmap(REGULAR_PAGE, 7, PAGE, 16).is_ok());
        assert!(check_mmap(REGULAR_PAGE, 8, PAGE, 16).is_err());
        assert!(check_mmap(NC_PAGE, 0, PAGE, 16).is_ok());
        assert!(check_mmap(CLOCK_INFO, 0, PAGE, 16).is_ok());
        assert!(check_mmap(6, 0, PAGE, 16).is_err(), "ALLOC_WC needs dynamic UARs");
        assert!(check_mmap(8, 0, PAGE, 16).is_err(), "device memory");
    }

    #[test]
    fn clock_info_converts_one_cycle_to_one_nanosecond() {
        let c = clock_info();
        assert_eq!(c.sign & 1, 0, "no update in progress");
        assert_eq!(u64::from(c.mult) >> c.shift, 1);
        assert!(c.shift < 64);
        assert_eq!(c.cycles & !c.mask, 0);
    }
}

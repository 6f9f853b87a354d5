//! Wait for completions from async code (feature `tokio`): an [`AsyncCq`] sleeps on its
//! completion channel through tokio's reactor while a producer thread writes completions
//! at random intervals, and the task prints each one as it arrives. The device is the first
//! argument (default `model-mlx5`, which needs no hardware).
//!
//! `cargo run --features tokio --example async_wait [DEVICE]`

use dvcq::verbs::{Access, QpType, SendOp, SendWr};
use dvcq::{AsyncCq, Context, CqOptions, QpInit};
use std::time::{Duration, Instant};

fn main() -> std::process::ExitCode {
    let device = std::env::args().nth(1).unwrap_or_else(|| "model-mlx5".into());
    let rt = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("async_wait: no tokio runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(&device)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("async_wait: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(device: &str) -> Result<(), dvcq::Error> {
    const N: u64 = 10;
    let ctx = Context::open(device)?;
    let channel = ctx.create_channel()?;
    let cq = ctx.create_cq_on(&channel, CqOptions::new(64))?;
    let pd = ctx.alloc_pd()?;
    let mr = pd.reg_mr(4096, Access::ALL)?;
    let mut qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq))?;
    let me = qp.endpoint()?;
    qp.connect(&me)?;
    let mut cq = AsyncCq::new(cq)?;

    // Nothing posted yet: a bounded wait comes back empty.
    let mut wcs = [dvcq::Completion::default(); 8];
    let idle = cq.wait_timeout(&mut wcs, Duration::from_millis(20)).await?;
    println!("idle: {} completions in 20 ms", idle.len());

    // A producer thread posts RDMA WRITEs at random intervals; each wr_id is its post time.
    let t0 = Instant::now();
    let producer = std::thread::spawn(move || -> Result<(), dvcq::Error> {
        let sg = [mr.slice(0, 8)?];
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..N {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            std::thread::sleep(Duration::from_micros(1000 + x % 9000));
            let posted = t0.elapsed().as_nanos() as u64;
            qp.post_send(&[SendWr::new(posted, SendOp::Write(mr.remote().at(64)), &sg)])?;
        }
        Ok(())
    });
    for i in 0..N {
        let wc = cq.next().await?;
        let latency = Duration::from_nanos((t0.elapsed().as_nanos() as u64).saturating_sub(wc.wr_id));
        println!("completion {i}: {} after {latency:.1?}", wc.status.name());
    }
    producer
        .join()
        .map_err(|_| dvcq::Error::Event { device: device.into(), what: "the producer panicked".into() })??;
    println!("{N} completions, {} completion events slept on", cq.cq().events_taken());
    Ok(())
}

//! Poll a CQ through dvcq's one API: an RC QP connected to itself writes 8 bytes into its
//! own memory region, and the write's completion is polled by whichever backend the device
//! gets. The device is the first argument (default `model-mlx5`, which needs no hardware).

use dvcq::verbs::{Access, QpType, SendOp, SendWr};
use dvcq::{Completion, Context, CqOptions, QpInit};
use std::time::{Duration, Instant};

fn main() -> std::process::ExitCode {
    let device = std::env::args().nth(1).unwrap_or_else(|| "model-mlx5".into());
    match run(&device) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("poll: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(device: &str) -> Result<(), dvcq::Error> {
    let ctx = Context::open(device)?;
    let mut cq = ctx.create_cq(CqOptions::new(256))?;
    let pd = ctx.alloc_pd()?;
    let mr = pd.reg_mr(4096, Access::ALL)?;
    let mut qp = pd.create_qp(&QpInit::new(QpType::Rc, &cq))?;
    let me = qp.endpoint()?;
    qp.connect(&me)?;
    mr.write(0, b"dvcq!!!!")?;
    qp.post_send(&[SendWr::new(7, SendOp::Write(mr.remote().at(64)), &[mr.slice(0, 8)?])])?;
    let mut wcs = [Completion::default(); 16];
    let deadline = Instant::now() + Duration::from_secs(10);
    let polled = loop {
        match cq.poll(&mut wcs) {
            [] if Instant::now() > deadline => {
                eprintln!("no completion within 10 s");
                std::process::exit(1);
            }
            [] => std::hint::spin_loop(),
            polled => break polled,
        }
    };
    let mut landed = [0u8; 8];
    mr.read(64, &mut landed)?;
    println!(
        "{device}: {} completion, wr_id {}, status {}, data {:?}; polled by {}: {}",
        polled.len(),
        polled[0].wr_id,
        polled[0].status.as_str(),
        String::from_utf8_lossy(&landed),
        cq.backend().kind.name(),
        cq.backend().reason
    );
    Ok(())
}

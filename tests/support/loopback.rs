//! An RC QP connected to itself, the setup of the tests that post work and poll it back on
//! one device (the models, or an emulated device under the preload). Included with
//! `#[path]` by the library's tests and the command's.

use dvcq::verbs::{Access, QpType};
use dvcq::{Context, Cq, Mr, Pd, Qp, QpInit};

/// A protection domain, a 4096-byte region with every access in it, and an RC QP whose
/// completions go to `cq`, connected to itself. Keep the domain as long as the QP.
pub fn rc_to_itself(ctx: &Context, cq: &Cq) -> (Pd, Mr, Qp) {
    let pd = ctx.alloc_pd().unwrap();
    let mr = pd.reg_mr(4096, Access::ALL).unwrap();
    let mut qp = pd.create_qp(&QpInit::new(QpType::Rc, cq)).unwrap();
    let me = qp.endpoint().unwrap();
    qp.connect(&me).unwrap();
    (pd, mr, qp)
}

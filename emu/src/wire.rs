//! The wire between the emulated devices of different processes on one host: what one
//! process's device sends another's when a QP's peer lives there.
//!
//! * **Finding each other.** Every process that creates a QP takes a *slot*, 1 to
//!   [`MAX_SLOT`], by holding an exclusive `flock` on `wire/slot-<N>.lock` in the user's
//!   private emulator directory (`dvcq-emu-<uid>` in the temporary directory, where the sysfs
//!   tree is); the kernel drops the lock when the process exits, however it exits. The slot
//!   is the high bits of every QPN the process hands out ([`qpn_in`]), so QPNs are unique
//!   across the host's processes and a QPN names the process that owns it ([`slot_of`]).
//!   The process's device listens on `wire/slot-<N>.sock`, a UNIX stream socket; a stale
//!   socket file of a process that held the slot before is replaced.
//! * **What travels.** Messages are operations and data, never a vendor's WQEs or CQEs: a
//!   [`Header`] and its payload. A request names the operation ([`Op`]), the destination
//!   and source QPNs, the remote address and key, the immediate, and carries the data of a
//!   SEND or WRITE; its reply says how the responder took it ([`Status`]) and carries the
//!   data of a READ. So a second vendor's device (irdma) speaks the same wire: each side
//!   parses its own provider's WQEs and writes its own CQEs.
//! * **Ordering.** Each process opens one connection to each peer process it sends to and
//!   takes the replies on it; the responder executes the requests to one QP in the order
//!   they arrived and replies in that order, so a requester QP's work completes in order.
//! * **A peer that goes away.** Its connection closes (the kernel closes the socket of an
//!   exiting process) or cannot be made: the sender learns it at once ([`Event::Lost`]).
//!
//! Every socket is non-blocking and is served by the device thread; nothing here blocks.

use bytemuck::{Pod, Zeroable};
use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

/// The highest slot; slot 0 means "no wire" (QPNs of a process that could not take one).
pub const MAX_SLOT: u32 = 127;
/// Bits of a QPN below the slot: the process's own numbering.
pub const LOCAL_QPN_BITS: u32 = 17;
/// The mask of a QPN's local part.
pub const LOCAL_QPN_MASK: u32 = (1 << LOCAL_QPN_BITS) - 1;
/// `Header::magic`: "dvcq wire, version 1".
pub const MAGIC: u32 = 0x6477_0001;
/// The largest payload a message may carry (a verbs message is at most 1 GiB, the port's
/// `max_msg_sz`).
pub const MAX_PAYLOAD: u32 = 1 << 30;

/// An operation, as the requester's provider posted it (vendor-neutral).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Op {
    Send = 1,
    SendImm = 2,
    SendInv = 3,
    Write = 4,
    WriteImm = 5,
    Read = 6,
    /// Compare-and-swap at `raddr`: the payload is the swap value then the compare value,
    /// big-endian; the reply's payload the 8 bytes found.
    CompareSwap = 7,
    /// Fetch-and-add at `raddr`: the payload is the addend (then 8 bytes unused),
    /// big-endian; the reply's payload the 8 bytes found.
    FetchAdd = 8,
}

impl Op {
    /// The operation numbered `v` on the wire.
    pub fn from_wire(v: u8) -> Option<Op> {
        Some(match v {
            1 => Op::Send,
            2 => Op::SendImm,
            3 => Op::SendInv,
            4 => Op::Write,
            5 => Op::WriteImm,
            6 => Op::Read,
            7 => Op::CompareSwap,
            8 => Op::FetchAdd,
            _ => return None,
        })
    }

    /// Whether the operation consumes a receive at the responder.
    pub fn consumes_receive(self) -> bool {
        matches!(self, Op::Send | Op::SendImm | Op::SendInv | Op::WriteImm)
    }
}

/// How the responder took a request (a reply's `status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Status {
    /// Done: for a READ, the payload is the data.
    Ok = 0,
    /// The rkey, range or access of the remote region does not allow it (a NAK).
    RemoteAccess = 1,
    /// The message does not fit the receive (a NAK).
    RemoteInvalid = 2,
    /// The responder failed it otherwise (its receive's own key, its QP in error).
    RemoteOp = 3,
    /// No receive was posted within the requester's RNR retries.
    RnrExceeded = 4,
    /// The destination QP does not exist or never became ready: on a fabric the requester
    /// would retransmit until its retry count ran out.
    NoQp = 5,
}

impl Status {
    /// The status numbered `v` on the wire; an unknown one reads as [`Status::RemoteOp`].
    pub fn from_wire(v: u8) -> Status {
        match v {
            0 => Status::Ok,
            1 => Status::RemoteAccess,
            2 => Status::RemoteInvalid,
            4 => Status::RnrExceeded,
            5 => Status::NoQp,
            _ => Status::RemoteOp,
        }
    }
}

/// How long [`Wire::reply`] waits for room in a full socket buffer.
pub const REPLY_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// `Header::kind`.
pub const KIND_REQUEST: u8 = 1;
/// `Header::kind`.
pub const KIND_REPLY: u8 = 2;
/// `Header::flags`: the requester asked for a solicited event.
pub const FLAG_SOLICITED: u8 = 1;
/// `Header::flags`: a datagram (UD): no reply; one the responder cannot take is dropped.
pub const FLAG_DATAGRAM: u8 = 2;

/// Every message's header, in the host's byte order (both ends run on one host); the
/// payload (`payload` bytes) follows it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct Header {
    pub magic: u32,
    /// [`KIND_REQUEST`] or [`KIND_REPLY`].
    pub kind: u8,
    /// An [`Op`].
    pub op: u8,
    /// A reply's [`Status`].
    pub status: u8,
    /// [`FLAG_SOLICITED`].
    pub flags: u8,
    /// The responder's QP.
    pub dst_qpn: u32,
    /// The requester's QP.
    pub src_qpn: u32,
    /// The requester's sequence number on its connection; a reply echoes it.
    pub seq: u32,
    /// Immediate data (or the rkey to invalidate), big-endian as posted.
    pub imm: u32,
    /// The remote address of a WRITE or READ.
    pub raddr: u64,
    /// The remote key of a WRITE or READ.
    pub rkey: u32,
    /// A READ's length; a reply's byte count.
    pub length: u32,
    /// The requester's RNR retry count (7: retry for ever).
    pub rnr_retry: u8,
    pub reserved: [u8; 3],
    /// Bytes of payload after the header.
    pub payload: u32,
    /// A datagram's Q_Key.
    pub qkey: u32,
    pub reserved2: u32,
}

static_assertions::const_assert_eq!(size_of::<Header>(), 56);
static_assertions::const_assert_eq!(std::mem::offset_of!(Header, raddr), 24);
static_assertions::const_assert_eq!(std::mem::offset_of!(Header, payload), 44);

/// One message received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub header: Header,
    pub payload: Vec<u8>,
}

/// The QPN of local number `local` in a process holding `slot`.
pub fn qpn_in(slot: u32, local: u32) -> u32 {
    (slot << LOCAL_QPN_BITS) | (local & LOCAL_QPN_MASK)
}

/// The slot a QPN belongs to (0: a process without one).
pub fn slot_of(qpn: u32) -> u32 {
    (qpn & 0xff_ffff) >> LOCAL_QPN_BITS
}

/// The directory both ends know: `wire/` in the user's private emulator directory.
pub fn dir(parent: &Path) -> io::Result<PathBuf> {
    // SAFETY: getuid cannot fail and takes no arguments.
    let uid = unsafe { libc::getuid() };
    let mine = parent.join(format!("dvcq-emu-{uid}"));
    crate::sysfs::own_dir(&mine, uid)?;
    let wire = mine.join("wire");
    crate::sysfs::own_dir(&wire, uid)?;
    Ok(wire)
}

/// The socket a slot's device listens on.
pub fn socket_path(dir: &Path, slot: u32) -> PathBuf {
    dir.join(format!("slot-{slot}.sock"))
}

/// A slot this process holds: the lock, and the listening socket.
#[derive(Debug)]
pub struct Slot {
    pub number: u32,
    pub dir: PathBuf,
    _lock: std::fs::File,
    listener: OwnedFd,
}

impl Slot {
    /// Takes the first free slot under `dir` and listens on its socket.
    ///
    /// # Errors
    ///
    /// Every slot is taken, or a lock file or the socket cannot be made.
    pub fn take(dir: &Path) -> io::Result<Slot> {
        for number in 1..=MAX_SLOT {
            let lock = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(dir.join(format!("slot-{number}.lock")))?;
            // SAFETY: flock on the file's own open descriptor; no memory is involved.
            if unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                continue;
            }
            // The slot is ours: a socket file left there is a former holder's.
            let path = socket_path(dir, number);
            let _ = std::fs::remove_file(&path);
            let listener = listen(&path)?;
            return Ok(Slot { number, dir: dir.to_path_buf(), _lock: lock, listener });
        }
        Err(io::Error::other(format!("all {MAX_SLOT} slots under {} are taken", dir.display())))
    }
}

/// `sockaddr_un` for `path`.
fn sockaddr(path: &Path) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid (empty) address.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() >= a.sun_path.len() {
        return Err(io::Error::other(format!("the socket path {} is too long for a UNIX socket", path.display())));
    }
    for (d, s) in a.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let len = std::mem::offset_of!(libc::sockaddr_un, sun_path) + bytes.len() + 1;
    Ok((a, len as libc::socklen_t))
}

/// A non-blocking, close-on-exec UNIX stream socket.
fn stream_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket creation; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor this function owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn listen(path: &Path) -> io::Result<OwnedFd> {
    let (addr, len) = sockaddr(path)?;
    let fd = stream_socket()?;
    // SAFETY: addr is a valid sockaddr_un of `len` bytes; fd is a socket.
    if unsafe { libc::bind(fd.as_raw_fd(), (&addr as *const libc::sockaddr_un).cast(), len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a bound socket.
    if unsafe { libc::listen(fd.as_raw_fd(), 128) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

/// One connection: what is queued to send, and what arrived and is not a whole message yet.
#[derive(Debug)]
struct Conn {
    fd: OwnedFd,
    out: Vec<u8>,
    sent: usize,
    inb: Vec<u8>,
}

/// What a connection's read came to.
enum Read {
    Open,
    Closed,
}

impl Conn {
    fn new(fd: OwnedFd) -> Conn {
        Conn { fd, out: Vec::new(), sent: 0, inb: Vec::new() }
    }

    fn queue(&mut self, h: &Header, payload: &[u8]) {
        self.out.extend_from_slice(bytemuck::bytes_of(h));
        self.out.extend_from_slice(payload);
    }

    /// Sends what the socket takes now. Err: the connection is broken.
    fn flush(&mut self) -> io::Result<()> {
        while self.sent < self.out.len() {
            let rest = &self.out[self.sent..];
            // SAFETY: `rest` is readable memory of its length; MSG_NOSIGNAL: a closed peer is an error, not a signal.
            let n = unsafe {
                libc::send(
                    self.fd.as_raw_fd(),
                    rest.as_ptr().cast(),
                    rest.len(),
                    libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
                )
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) {
                    break;
                }
                return Err(e);
            }
            self.sent += n as usize;
        }
        if self.sent == self.out.len() {
            self.out.clear();
            self.sent = 0;
        } else if self.sent > (1 << 20) {
            self.out.drain(..self.sent);
            self.sent = 0;
        }
        Ok(())
    }

    /// Reads what arrived, appending whole messages to `into`.
    fn read(&mut self, into: &mut Vec<Message>) -> io::Result<Read> {
        let mut buf = [0u8; 64 * 1024];
        let mut state = Read::Open;
        loop {
            // SAFETY: `buf` is writable memory of its length.
            let n = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
            if n < 0 {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::WouldBlock => break,
                    io::ErrorKind::Interrupted => continue,
                    _ => return Err(e),
                }
            }
            if n == 0 {
                state = Read::Closed;
                break;
            }
            self.inb.extend_from_slice(&buf[..n as usize]);
        }
        let hl = size_of::<Header>();
        let mut at = 0;
        while self.inb.len() - at >= hl {
            let h: Header = bytemuck::pod_read_unaligned(&self.inb[at..at + hl]);
            if h.magic != MAGIC || h.payload > MAX_PAYLOAD {
                return Err(io::Error::other("a message that is not the emulator's wire format"));
            }
            let end = at + hl + h.payload as usize;
            if self.inb.len() < end {
                break;
            }
            into.push(Message { header: h, payload: self.inb[at + hl..end].to_vec() });
            at = end;
        }
        self.inb.drain(..at);
        Ok(state)
    }
}

/// Something the wire brought.
#[derive(Debug)]
pub enum Event {
    /// A request from a peer, to answer on connection `from` with [`Wire::reply`].
    Request { from: u64, message: Message },
    /// A reply from peer slot `slot` to one of this process's requests.
    Reply { slot: u32, message: Message },
    /// The connection to peer slot `slot` broke, or could not be made: every request sent
    /// to it and not answered is lost.
    Lost { slot: u32 },
}

/// This process's slot, taken (and its socket listened on) at the first call, under the
/// temporary directory's `dvcq-emu-<uid>/wire`; `None` when none could be taken (the reason
/// is said once on standard error).
pub fn process_slot() -> Option<&'static Arc<Slot>> {
    static SLOT: OnceLock<Option<Arc<Slot>>> = OnceLock::new();
    SLOT.get_or_init(|| match dir(&std::env::temp_dir()).and_then(|d| Slot::take(&d)) {
        Ok(s) => Some(Arc::new(s)),
        Err(e) => {
            eprintln!("dvcq-emu: no wire to other processes ({e}); QPs reach only QPs of this process");
            None
        }
    })
    .as_ref()
}

/// This process's end of the wire.
#[derive(Debug, Default)]
pub struct Wire {
    slot: Option<Arc<Slot>>,
    /// The process that attached the slot (a forked child shares the sockets, not the wire).
    pid: u32,
    /// Connections this process opened to peers: requests out, replies in.
    peers: HashMap<u32, Conn>,
    /// Connections peers opened to this process: requests in, replies out.
    accepted: HashMap<u64, Conn>,
    next_accepted: u64,
    next_seq: u32,
    /// Peers whose connection broke since the last poll.
    lost: Vec<u32>,
}

impl Wire {
    /// Starts listening as `slot`.
    pub fn attach(&mut self, slot: Arc<Slot>) {
        self.slot = Some(slot);
        self.pid = std::process::id();
    }

    /// Whether this process attached the wire (not a child forked after it did).
    pub fn attached_here(&self) -> bool {
        self.slot.is_some() && self.pid == std::process::id()
    }

    /// The slot this process listens as, if any.
    pub fn slot(&self) -> Option<u32> {
        self.slot.as_ref().map(|s| s.number)
    }

    /// Sends a request to the process holding `slot`; returns the sequence number its reply
    /// will carry.
    ///
    /// # Errors
    ///
    /// `WouldBlock` when the peer's listener is full for now (try again later); any other
    /// error means the peer is gone.
    pub fn request(&mut self, slot: u32, mut h: Header, payload: &[u8]) -> io::Result<u32> {
        let conn = match self.peers.entry(slot) {
            std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let dir = self.slot.as_ref().map(|s| s.dir.clone()).ok_or_else(|| io::Error::other("no wire"))?;
                v.insert(Conn::new(connect(&socket_path(&dir, slot))?))
            }
        };
        self.next_seq = self.next_seq.wrapping_add(1);
        h.magic = MAGIC;
        h.kind = KIND_REQUEST;
        h.seq = self.next_seq;
        h.payload = payload.len() as u32;
        conn.queue(&h, payload);
        if conn.flush().is_err() {
            self.peers.remove(&slot);
            self.lost.push(slot);
        }
        Ok(h.seq)
    }

    /// Answers request `to` (its header) on connection `from`, with `status` and `payload`.
    /// The reply is in the kernel's socket buffer when this returns (waiting up to
    /// [`REPLY_WAIT`] for room): the responder's CQE, which the caller writes next, may let its
    /// process exit, and a reply left in this process's own buffer would go with it.
    pub fn reply(&mut self, from: u64, to: &Header, status: Status, length: u32, payload: &[u8]) {
        let Some(conn) = self.accepted.get_mut(&from) else { return };
        let h = Header {
            magic: MAGIC,
            kind: KIND_REPLY,
            op: to.op,
            status: status as u8,
            dst_qpn: to.dst_qpn,
            src_qpn: to.src_qpn,
            seq: to.seq,
            length,
            payload: payload.len() as u32,
            ..Header::default()
        };
        conn.queue(&h, payload);
        let deadline = std::time::Instant::now() + REPLY_WAIT;
        loop {
            if conn.flush().is_err() {
                self.accepted.remove(&from);
                return;
            }
            if conn.out.is_empty() || std::time::Instant::now() > deadline {
                return;
            }
            let mut p = libc::pollfd { fd: conn.fd.as_raw_fd(), events: libc::POLLOUT, revents: 0 };
            // SAFETY: one live pollfd; a 10 ms timeout.
            unsafe { libc::poll(&mut p, 1, 10) };
        }
    }

    /// Accepts new connections, sends what is queued, and returns what arrived.
    pub fn poll(&mut self) -> Vec<Event> {
        let mut events: Vec<Event> = self.lost.drain(..).map(|slot| Event::Lost { slot }).collect();
        let Some(slot) = &self.slot else { return events };
        loop {
            // SAFETY: accept4 on the listening socket; no address is asked for.
            let fd = unsafe {
                libc::accept4(
                    slot.listener.as_raw_fd(),
                    std::ptr::null_mut(),
                    std::ptr::null_mut(),
                    libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                )
            };
            if fd < 0 {
                break;
            }
            self.next_accepted += 1;
            // SAFETY: fd is a fresh descriptor accept4 returned.
            self.accepted.insert(self.next_accepted, Conn::new(unsafe { OwnedFd::from_raw_fd(fd) }));
        }
        let mut msgs = Vec::new();
        self.accepted.retain(|&id, c| {
            msgs.clear();
            let keep = c.flush().is_ok() && matches!(c.read(&mut msgs), Ok(Read::Open));
            events.extend(
                msgs.drain(..)
                    .filter(|m| m.header.kind == KIND_REQUEST)
                    .map(|message| Event::Request { from: id, message }),
            );
            keep
        });
        let mut broken = Vec::new();
        for (&s, c) in self.peers.iter_mut() {
            msgs.clear();
            let open = c.flush().is_ok() && matches!(c.read(&mut msgs), Ok(Read::Open));
            events.extend(
                msgs.drain(..).filter(|m| m.header.kind == KIND_REPLY).map(|message| Event::Reply { slot: s, message }),
            );
            if !open {
                broken.push(s);
            }
        }
        for s in broken {
            self.peers.remove(&s);
            events.push(Event::Lost { slot: s });
        }
        events
    }

    /// The descriptors whose readability means work for the device (for a wait).
    pub fn fds(&self) -> Vec<i32> {
        let mut v: Vec<i32> = self.slot.iter().map(|s| s.listener.as_raw_fd()).collect();
        v.extend(self.accepted.values().map(|c| c.fd.as_raw_fd()));
        v.extend(self.peers.values().map(|c| c.fd.as_raw_fd()));
        v
    }
}

/// Connects to a peer's listening socket.
fn connect(path: &Path) -> io::Result<OwnedFd> {
    let (addr, len) = sockaddr(path)?;
    let fd = stream_socket()?;
    // SAFETY: addr is a valid sockaddr_un of `len` bytes; fd is a socket.
    if unsafe { libc::connect(fd.as_raw_fd(), (&addr as *const libc::sockaddr_un).cast(), len) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(fd)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(test: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("dvcq-emu-wire-test.{}.{test}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn qpns_carry_their_slot() {
        let q = qpn_in(5, 0x100);
        assert_eq!(slot_of(q), 5);
        assert_eq!(q & LOCAL_QPN_MASK, 0x100);
        assert!(qpn_in(MAX_SLOT, LOCAL_QPN_MASK) <= 0xff_ffff, "QPNs are 24 bits");
        assert_ne!(qpn_in(1, 0x100), qpn_in(2, 0x100));
        assert_eq!(slot_of(0x100), 0, "a process without a slot");
    }

    #[test]
    fn two_holders_get_two_slots_and_a_freed_one_is_taken_again() {
        let d = dir(&scratch("slots")).unwrap();
        let a = Slot::take(&d).unwrap();
        let b = Slot::take(&d).unwrap();
        assert_eq!((a.number, b.number), (1, 2));
        drop(a);
        let c = Slot::take(&d).unwrap();
        assert_eq!(c.number, 1, "a slot whose holder went is free, its stale socket replaced");
    }

    fn wait_for(w: &mut Wire, mut want: impl FnMut(&Event) -> bool) -> Event {
        for _ in 0..2000 {
            if let Some(e) = w.poll().into_iter().find(&mut want) {
                return e;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        panic!("nothing came");
    }

    #[test]
    fn a_request_and_its_reply_travel_with_their_data_and_a_lost_peer_is_reported() {
        let d = dir(&scratch("travel")).unwrap();
        let mut a = Wire::default();
        a.attach(Arc::new(Slot::take(&d).unwrap()));
        let mut b = Wire::default();
        b.attach(Arc::new(Slot::take(&d).unwrap()));
        let big = vec![0xa5u8; 300_000];
        let h =
            Header { op: Op::Send as u8, dst_qpn: qpn_in(2, 0x100), src_qpn: qpn_in(1, 0x100), ..Header::default() };
        let seq = a.request(2, h, &big).unwrap();
        let mut got = None;
        for _ in 0..2000 {
            a.poll();
            if let Some(Event::Request { from, message }) =
                b.poll().into_iter().find(|e| matches!(e, Event::Request { .. }))
            {
                got = Some((from, message));
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let (from, m) = got.expect("the request arrived");
        assert_eq!((m.header.seq, m.header.op, m.payload.len()), (seq, Op::Send as u8, big.len()));
        assert_eq!(m.payload, big);
        b.reply(from, &m.header, Status::RemoteAccess, 0, b"data");
        let Event::Reply { slot, message } = wait_for(&mut a, |e| matches!(e, Event::Reply { .. })) else {
            unreachable!()
        };
        assert_eq!(
            (slot, message.header.seq, Status::from_wire(message.header.status)),
            (2, seq, Status::RemoteAccess)
        );
        assert_eq!(message.payload, b"data");
        drop(b);
        assert!(matches!(wait_for(&mut a, |e| matches!(e, Event::Lost { .. })), Event::Lost { slot: 2 }));
        // A peer that is gone cannot be reached.
        assert!(a.request(2, h, b"x").is_err());
    }
}

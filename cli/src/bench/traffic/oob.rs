//! The out-of-band exchange of a two-host `bench traffic` run: one TCP connection between
//! the server (`--server`) and the client (`HOST`), carrying one JSON object per line.
//!
//! The first line each side sends is its hello: `{"protocol":"dvcq-traffic","version":N,...}`.
//! A first line that is not such an object is a peer that is not dvcq; a different `version`
//! is refused by name on both sides before anything else is read. After the hellos the
//! sides exchange their QPs' endpoints and memory regions, then the figures of each phase.
//! Either side that fails sends `{"msg":"error","what":...}` before it exits, so that the
//! other exits with the reason instead of a timeout.
//!
//! Every read is bounded: [`Oob::recv`] waits at most the exchange's timeout, a line is at
//! most [`LINE_MAX`] bytes, and a closed connection is an error naming the step it cut.

use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// What the hello's `protocol` field says.
pub const PROTOCOL: &str = "dvcq-traffic";
/// The version of the exchange this build speaks; both sides must speak the same.
pub const VERSION: u32 = 1;
/// The longest line either side accepts, in bytes.
pub const LINE_MAX: usize = 64 * 1024;
/// perftest's default port.
pub const DEFAULT_PORT: u16 = 18515;

/// A failure of the exchange, one line saying what and with whom.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct OobError(pub String);

/// One open exchange with the peer.
#[derive(Debug)]
pub struct Oob {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    /// `HOST:PORT` of the peer, for messages.
    pub peer: String,
    timeout: Duration,
}

/// Tries to connect to `host:port` until `wait` has passed (the server may still be
/// starting); each refusal is retried after a short pause.
///
/// # Errors
///
/// The name does not resolve, or no server accepted within `wait`: the last reason.
pub fn connect(host: &str, port: u16, wait: Duration) -> Result<Oob, OobError> {
    let peer = format!("{host}:{port}");
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| OobError(format!("{peer}: cannot resolve {host:?}: {e}")))?
        .collect();
    let t0 = Instant::now();
    let mut last = String::from("no address");
    loop {
        for a in &addrs {
            let left = wait.saturating_sub(t0.elapsed()).max(Duration::from_millis(100));
            match TcpStream::connect_timeout(a, left) {
                Ok(s) => return Oob::new(s, peer, wait),
                Err(e) => last = e.to_string(),
            }
        }
        if t0.elapsed() >= wait {
            return Err(OobError(format!(
                "no dvcq bench traffic server at {peer} ({last}; tried for {:.1} s): start `dvcq bench traffic \
                 --server` on that host first, or give its --port",
                wait.as_secs_f64()
            )));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits for one client on `listener` (for ever when `wait` is `None`).
///
/// # Errors
///
/// No client within `wait`, or the listener failed.
pub fn accept(listener: &TcpListener, timeout: Duration, wait: Option<Duration>) -> Result<Oob, OobError> {
    let t0 = Instant::now();
    listener.set_nonblocking(true).map_err(|e| OobError(format!("listening socket: {e}")))?;
    loop {
        match listener.accept() {
            Ok((s, addr)) => {
                s.set_nonblocking(false).map_err(|e| OobError(format!("{addr}: {e}")))?;
                return Oob::new(s, addr.to_string(), timeout);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Err(OobError(format!("accepting a client: {e}"))),
        }
        if wait.is_some_and(|w| t0.elapsed() >= w) {
            return Err(OobError(format!("no client connected in {:.0} s", t0.elapsed().as_secs_f64())));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Oob {
    fn new(s: TcpStream, peer: String, timeout: Duration) -> Result<Oob, OobError> {
        let io = |e: std::io::Error| OobError(format!("{peer}: {e}"));
        s.set_nodelay(true).map_err(io)?;
        s.set_read_timeout(Some(timeout)).map_err(io)?;
        s.set_write_timeout(Some(timeout)).map_err(io)?;
        let writer = s.try_clone().map_err(io)?;
        Ok(Oob { reader: BufReader::new(s), writer, peer, timeout })
    }

    /// Sends one message.
    ///
    /// # Errors
    ///
    /// The connection failed.
    pub fn send<T: Serialize>(&mut self, msg: &T) -> Result<(), OobError> {
        let mut line = serde_json::to_vec(msg).map_err(|e| OobError(format!("encoding a message: {e}")))?;
        line.push(b'\n');
        self.writer
            .write_all(&line)
            .map_err(|e| OobError(format!("{}: the connection failed while sending: {e}", self.peer)))
    }

    /// Tells the peer why this side stops (best effort: the peer may be gone).
    pub fn send_error(&mut self, what: &str) {
        let _ = self.send(&serde_json::json!({ "msg": "error", "what": what }));
        let _ = self.writer.shutdown(Shutdown::Write);
    }

    /// Reads one line, waiting at most the exchange's timeout; `step` names what was awaited.
    fn read_line(&mut self, step: &str) -> Result<String, OobError> {
        let mut buf = Vec::new();
        let r = (&mut self.reader).take(LINE_MAX as u64 + 1).read_until(b'\n', &mut buf);
        match r {
            Ok(0) => Err(OobError(format!("{}: the peer closed the connection (waiting for {step})", self.peer))),
            Ok(_) if buf.last() != Some(&b'\n') && buf.len() > LINE_MAX => Err(OobError(format!(
                "{}: the peer is not dvcq bench traffic: it sent a line of more than {LINE_MAX} bytes",
                self.peer
            ))),
            Ok(_) if buf.last() != Some(&b'\n') => Err(OobError(format!(
                "{}: the peer closed the connection in a message (waiting for {step})",
                self.peer
            ))),
            Ok(_) => Ok(String::from_utf8_lossy(&buf).trim_end().to_string()),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Err(OobError(format!(
                "{}: no answer in {:.0} s (waiting for {step})",
                self.peer,
                self.timeout.as_secs_f64()
            ))),
            Err(e) => Err(OobError(format!("{}: the connection failed (waiting for {step}): {e}", self.peer))),
        }
    }

    /// Reads the peer's hello and checks that it is dvcq speaking [`VERSION`]; returns the
    /// whole hello object.
    ///
    /// # Errors
    ///
    /// Not dvcq, another version, an error the peer reported, or the connection failed.
    pub fn recv_hello(&mut self) -> Result<serde_json::Value, OobError> {
        let line = self.read_line("the peer's hello")?;
        let v: Option<serde_json::Value> = serde_json::from_str(&line).ok();
        let Some(v) = v.filter(|v| v.get("protocol").and_then(|p| p.as_str()) == Some(PROTOCOL)) else {
            if let Some(what) = peer_error(&line) {
                return Err(OobError(format!("{}: the peer stopped: {what}", self.peer)));
            }
            return Err(OobError(format!(
                "{}: the peer is not dvcq bench traffic: it sent {:?} where a {PROTOCOL} hello was due",
                self.peer,
                clip(&line)
            )));
        };
        match v.get("version").and_then(serde_json::Value::as_u64) {
            Some(n) if n == u64::from(VERSION) => Ok(v),
            other => {
                let theirs = other.map_or_else(|| "no version".to_string(), |n| format!("version {n}"));
                let dvcq = v.get("dvcq").and_then(|d| d.as_str()).unwrap_or("an unknown release");
                Err(OobError(format!(
                    "{}: the peer speaks the {PROTOCOL} exchange {theirs} (dvcq {dvcq}), this dvcq speaks version \
                     {VERSION} (dvcq {}): run the same dvcq release on both hosts",
                    self.peer,
                    env!("CARGO_PKG_VERSION")
                )))
            }
        }
    }

    /// Reads one message of kind `msg` (the `msg` field) into `T`.
    ///
    /// # Errors
    ///
    /// An error the peer reported, another message, a malformed one, a timeout or a closed
    /// connection.
    pub fn recv<T: for<'de> Deserialize<'de>>(&mut self, msg: &str) -> Result<T, OobError> {
        let line = self.read_line(msg)?;
        self.decode(&line, msg)
    }

    /// Whether the peer has stopped, looked at without waiting and without taking anything:
    /// an error it reported, or the connection closed or failed, is an error; a message
    /// that has arrived for later (the next phase's, sent while this side still finishes
    /// its own) stays where it is, for the read that wants it.
    ///
    /// # Errors
    ///
    /// The peer's error, or the connection closed or failed.
    pub fn check_peer(&mut self, during: &str) -> Result<(), OobError> {
        let first_line = |bytes: &[u8]| {
            bytes.iter().position(|&b| b == b'\n').map(|end| String::from_utf8_lossy(&bytes[..end]).into_owned())
        };
        let pending = if self.reader.buffer().is_empty() {
            let mut b = [0u8; 4096];
            self.writer.set_nonblocking(true).map_err(|e| OobError(format!("{}: {e}", self.peer)))?;
            let r = self.writer.peek(&mut b);
            self.writer.set_nonblocking(false).map_err(|e| OobError(format!("{}: {e}", self.peer)))?;
            match r {
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Ok(0) => return Err(OobError(format!("{}: the peer closed the exchange {during}", self.peer))),
                Ok(n) => first_line(&b[..n]),
                Err(e) => return Err(OobError(format!("{}: the connection failed {during}: {e}", self.peer))),
            }
        } else {
            first_line(self.reader.buffer())
        };
        match pending.as_deref().and_then(peer_error) {
            Some(what) => Err(OobError(format!("{}: the peer stopped: {what}", self.peer))),
            None => Ok(()),
        }
    }

    /// As [`Oob::recv`], but returns `None` at once when no line has arrived yet.
    ///
    /// # Errors
    ///
    /// As [`Oob::recv`].
    pub fn try_recv<T: for<'de> Deserialize<'de>>(&mut self, msg: &str) -> Result<Option<T>, OobError> {
        if self.reader.buffer().is_empty() {
            self.writer.set_nonblocking(true).map_err(|e| OobError(format!("{}: {e}", self.peer)))?;
            let mut b = [0u8; 1];
            let r = self.writer.peek(&mut b);
            self.writer.set_nonblocking(false).map_err(|e| OobError(format!("{}: {e}", self.peer)))?;
            match r {
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(None),
                // 0 bytes: closed; read_line reports it.
                Ok(_) => {}
                Err(e) => {
                    return Err(OobError(format!("{}: the connection failed (waiting for {msg}): {e}", self.peer)))
                }
            }
        }
        self.recv(msg).map(Some)
    }

    fn decode<T: for<'de> Deserialize<'de>>(&self, line: &str, msg: &str) -> Result<T, OobError> {
        if let Some(what) = peer_error(line) {
            return Err(OobError(format!("{}: the peer stopped: {what}", self.peer)));
        }
        let v: serde_json::Value = serde_json::from_str(line).map_err(|e| {
            OobError(format!("{}: a malformed message where {msg} was due ({e}): {:?}", self.peer, clip(line)))
        })?;
        let got = v.get("msg").and_then(|m| m.as_str()).unwrap_or("");
        if got != msg {
            return Err(OobError(format!("{}: the peer sent {got:?} where {msg:?} was due", self.peer)));
        }
        serde_json::from_value(v).map_err(|e| OobError(format!("{}: a malformed {msg} message: {e}", self.peer)))
    }
}

/// The `what` of an error message, if `line` is one.
fn peer_error(line: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    (v.get("msg")?.as_str()? == "error").then(|| v.get("what").and_then(|w| w.as_str()).unwrap_or("").to_string())
}

/// At most 80 characters of what a peer sent, for a message.
fn clip(s: &str) -> String {
    s.chars().take(80).collect()
}

/// This side's hello.
pub fn hello(role: &str, options: &impl Serialize) -> serde_json::Value {
    serde_json::json!({
        "protocol": PROTOCOL,
        "version": VERSION,
        "dvcq": env!("CARGO_PKG_VERSION"),
        "role": role,
        "options": options,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (Oob, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let c = connect("127.0.0.1", port, Duration::from_secs(2)).unwrap();
        let (s, _) = l.accept().unwrap();
        (c, s)
    }

    /// A look at the peer during a phase takes nothing: a message of the next phase that
    /// arrived early stays for its read; the peer's error and its leaving are errors.
    #[test]
    fn a_look_at_the_peer_leaves_its_next_message_and_reports_its_end() {
        let (mut c, mut s) = pair();
        assert!(c.check_peer("during the phase").is_ok(), "nothing sent yet");
        s.write_all(b"{\"msg\":\"latency\"}\n").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert!(c.check_peer("during the phase").is_ok());
        let v: serde_json::Value = c.recv("latency").unwrap();
        assert_eq!(v["msg"], "latency", "the message is still there for its read");
        s.write_all(b"{\"msg\":\"error\",\"what\":\"the device went away\"}\n").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let e = c.check_peer("during the phase").unwrap_err().0;
        assert!(e.contains("the peer stopped: the device went away"), "{e}");
        let (mut c, s) = pair();
        drop(s);
        std::thread::sleep(Duration::from_millis(50));
        let e = c.check_peer("during the phase").unwrap_err().0;
        assert!(e.contains("closed the exchange during the phase"), "{e}");
    }

    #[test]
    fn a_hello_of_another_version_is_refused_by_number() {
        let (mut c, mut s) = pair();
        s.write_all(b"{\"protocol\":\"dvcq-traffic\",\"version\":99,\"dvcq\":\"9.9.9\"}\n").unwrap();
        let e = c.recv_hello().unwrap_err().0;
        assert!(e.contains("version 99 (dvcq 9.9.9)") && e.contains(&format!("speaks version {VERSION}")), "{e}");
    }

    #[test]
    fn a_peer_that_is_not_dvcq_is_named_so() {
        let (mut c, mut s) = pair();
        s.write_all(b"SSH-2.0-OpenSSH_9.2\r\n").unwrap();
        let e = c.recv_hello().unwrap_err().0;
        assert!(e.contains("is not dvcq bench traffic") && e.contains("SSH-2.0"), "{e}");
    }

    #[test]
    fn a_line_without_end_is_bounded() {
        let (mut c, mut s) = pair();
        let big = vec![b'x'; LINE_MAX + 10];
        std::thread::spawn(move || {
            let _ = s.write_all(&big);
            std::thread::sleep(Duration::from_secs(1));
        });
        let e = c.recv_hello().unwrap_err().0;
        assert!(e.contains(&format!("more than {LINE_MAX} bytes")), "{e}");
    }

    #[test]
    fn the_peers_error_is_passed_on() {
        let (mut c, mut s) = pair();
        s.write_all(b"{\"msg\":\"error\",\"what\":\"-s differs\"}\n").unwrap();
        let e = c.recv::<serde_json::Value>("setup").unwrap_err().0;
        assert!(e.ends_with("the peer stopped: -s differs"), "{e}");
    }

    #[test]
    fn silence_is_a_timeout_and_a_closed_socket_is_named() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let mut c = connect("127.0.0.1", port, Duration::from_millis(300)).unwrap();
        let (s, _) = l.accept().unwrap();
        let t0 = Instant::now();
        let e = c.recv_hello().unwrap_err().0;
        assert!(e.contains("no answer in") && t0.elapsed() < Duration::from_secs(5), "{e}");
        assert!(c.try_recv::<serde_json::Value>("done").unwrap().is_none());
        drop(s);
        let e = c.recv::<serde_json::Value>("done").unwrap_err().0;
        assert!(e.contains("closed the connection (waiting for done)"), "{e}");
    }

    #[test]
    fn no_server_is_a_bounded_wait_with_a_clear_error() {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let t0 = Instant::now();
        let e = connect("127.0.0.1", port, Duration::from_millis(500)).unwrap_err().0;
        assert!(e.starts_with(&format!("no dvcq bench traffic server at 127.0.0.1:{port}")), "{e}");
        assert!(t0.elapsed() >= Duration::from_millis(500) && t0.elapsed() < Duration::from_secs(3));
    }
}

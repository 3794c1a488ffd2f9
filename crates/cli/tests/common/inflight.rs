//! The HTTP proxy of `crates/storage/tests/support/inflight_proxy.py`, for tests that count
//! the object GETs a run sends to an endpoint.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The proxy of `support/inflight_proxy.py` in front of `upstream`, holding each object GET
/// for `delay`; `most()` is the most GETs it has seen in flight at once.
pub struct InflightProxy {
    child: Child,
    pub endpoint: String,
    report: PathBuf,
}

impl Drop for InflightProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl InflightProxy {
    pub fn start(upstream: &str, delay: Duration, report: PathBuf) -> InflightProxy {
        InflightProxy::start_throttling(upstream, delay, report, "none")
    }

    /// As [`InflightProxy::start`], answering object GETs with 503 SlowDown: `alternate`
    /// every other one, `always` every one.
    pub fn start_throttling(
        upstream: &str,
        delay: Duration,
        report: PathBuf,
        throttle: &str,
    ) -> InflightProxy {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../storage/tests/support/inflight_proxy.py");
        // Port 0: the proxy binds a free port itself and writes it to REPORT.port (a port
        // picked here and bound there later could be taken in between, by the next proxy).
        let child = Command::new("python3")
            .arg(script)
            .args(["0", upstream, &delay.as_secs_f64().to_string()])
            .arg(&report)
            .arg(throttle)
            .stdout(Stdio::null())
            .spawn()
            .expect("python3 starts the proxy");
        let mut port_file = report.clone().into_os_string();
        port_file.push(".port");
        let deadline = Instant::now() + Duration::from_secs(20);
        let port = loop {
            let port = std::fs::read_to_string(&port_file)
                .ok()
                .and_then(|p| p.trim().parse::<u16>().ok());
            if let Some(port) = port
                && report.exists()
                && std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
            {
                break port;
            }
            assert!(Instant::now() < deadline, "the proxy did not start");
            std::thread::sleep(Duration::from_millis(50));
        };
        InflightProxy {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
            report,
        }
    }

    /// (most GETs in flight at once, GETs seen).
    pub fn most_and_count(&self) -> (u64, u64) {
        let [most, gets, ..] = self.report();
        (most, gets)
    }

    /// GETs answered with 503 SlowDown.
    pub fn throttled(&self) -> u64 {
        self.report()[2]
    }

    /// Object HEAD requests seen.
    pub fn heads(&self) -> u64 {
        self.report()[3]
    }

    fn report(&self) -> [u64; 4] {
        let text = std::fs::read_to_string(&self.report).unwrap();
        let mut parts = text.split_whitespace().map(|w| w.parse().unwrap());
        [(); 4].map(|()| parts.next().unwrap())
    }
}

//! Ports for tests, held by the test itself so that no other process can take them between
//! the moment they are chosen and the moment they are used.

use std::net::SocketAddr;

/// A TCP port on 127.0.0.1 that is bound but never listened on: a connection to it is
/// refused (RST) for as long as this value lives, and no other socket can bind it.
pub struct RefusingPort {
    fd: libc::c_int,
    pub port: u16,
}

impl RefusingPort {
    pub fn bind() -> RefusingPort {
        // Hand-written with libc: std's TcpListener listens at once, and a listening socket
        // would accept the connection this port exists to refuse.
        // SAFETY: plain socket creation; the result is checked.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let address = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 0,
            sin_addr: libc::in_addr {
                s_addr: u32::from_ne_bytes([127, 0, 0, 1]),
            },
            sin_zero: [0; 8],
        };
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: `address` is a valid sockaddr_in of `len` bytes.
        let bound = unsafe { libc::bind(fd, (&raw const address).cast(), len) };
        assert_eq!(bound, 0, "bind: {}", std::io::Error::last_os_error());
        let mut got: libc::sockaddr_in = address;
        let mut got_len = len;
        // SAFETY: `got` is a writable sockaddr_in and `got_len` its size.
        let named = unsafe { libc::getsockname(fd, (&raw mut got).cast(), &mut got_len) };
        assert_eq!(named, 0, "getsockname: {}", std::io::Error::last_os_error());
        RefusingPort {
            fd,
            port: u16::from_be(got.sin_port),
        }
    }

    pub fn address(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }
}

impl Drop for RefusingPort {
    fn drop(&mut self) {
        // SAFETY: the socket was created by `bind` and is closed once, here.
        unsafe { libc::close(self.fd) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_port_refuses_connections_and_cannot_be_bound_again() {
        let held = RefusingPort::bind();
        let error = std::net::TcpStream::connect(held.address()).unwrap_err();
        assert_eq!(
            error.kind(),
            std::io::ErrorKind::ConnectionRefused,
            "{error}"
        );
        assert!(std::net::TcpListener::bind(held.address()).is_err());
    }
}

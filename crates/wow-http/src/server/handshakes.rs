//! Refusing new TCP handshakes on a listening socket while those already under way finish.
//!
//! Closing a listening socket resets every connection whose handshake the kernel completed
//! after the last accept: its client wrote a request and sees it cut off. To leave no such
//! window, the stop first makes the listener drop new handshakes (a socket filter that
//! discards a bare SYN), then takes every connection that completes within a short settle,
//! then closes. A dropped SYN is sent again by its client about a second later, and meets the
//! closed port: the client sees its connect refused, never a request cut off.

use std::io;

use tokio::net::TcpListener;

/// Makes `listener` drop new handshakes (bare SYNs) while letting those under way complete.
/// Returns whether it could: only Linux has the socket filter it takes.
pub(super) fn refuse_new(listener: &TcpListener) -> io::Result<bool> {
    imp::refuse_new(listener)
}

#[cfg(target_os = "linux")]
mod imp {
    use std::io;

    use socket2::{SockFilter, SockRef};
    use tokio::net::TcpListener;

    // Classic BPF opcodes (linux/filter.h).
    const LOAD_BYTE_ABSOLUTE: u16 = 0x30; // BPF_LD | BPF_B | BPF_ABS
    const AND_CONSTANT: u16 = 0x54; // BPF_ALU | BPF_AND | BPF_K
    const JUMP_IF_EQUAL: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const RETURN_CONSTANT: u16 = 0x06; // BPF_RET | BPF_K

    /// Offset of the flags byte in a TCP header: a listener's filter sees the segment from
    /// its TCP header on.
    const TCP_FLAGS_OFFSET: u32 = 13;
    const SYN: u32 = 0x02;
    const ACK: u32 = 0x10;

    pub(super) fn refuse_new(listener: &TcpListener) -> io::Result<bool> {
        let program = [
            SockFilter::new(LOAD_BYTE_ABSOLUTE, 0, 0, TCP_FLAGS_OFFSET),
            SockFilter::new(AND_CONSTANT, 0, 0, SYN | ACK),
            // A bare SYN (a new handshake) falls through to the drop; anything else jumps
            // over it and is kept whole.
            SockFilter::new(JUMP_IF_EQUAL, 0, 1, SYN),
            SockFilter::new(RETURN_CONSTANT, 0, 0, 0),
            SockFilter::new(RETURN_CONSTANT, 0, 0, u32::MAX),
        ];
        SockRef::from(listener).attach_filter(&program)?;
        Ok(true)
    }
}

#[cfg(not(target_os = "linux"))]
mod imp {
    use std::io;

    use tokio::net::TcpListener;

    pub(super) fn refuse_new(_listener: &TcpListener) -> io::Result<bool> {
        Ok(false)
    }
}

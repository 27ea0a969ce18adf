//! The reusable read buffer and KSWE's "buf, limit → needed length" protocol (`kswe-abi.md` §1.1,
//! upstream `guest/internal/mem/mem.go`).
//!
//! A getter writes its value only when it fits and always returns the value's length; 0 means
//! empty or absent. [`ReadBuf::read`] offers the current buffer (2 KiB at first) and, when the
//! value is longer, grows the buffer to the reported length and asks again. The buffer keeps its
//! size for later reads, so steady-state reads need one host call and no allocation.

use std::fmt;

/// The first buffer size, as upstream's Go SDK (`readBufLimit`).
pub const INITIAL_LIMIT: usize = 2048;

/// How many times a read is retried when the value keeps growing between calls.
const MAX_ATTEMPTS: usize = 4;

/// The host reported a longer value on every retry (it must be stable within one export call).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnstableValue {
    /// What was read.
    pub what: &'static str,
    /// The last length the host reported.
    pub needed: usize,
}

impl fmt::Display for UnstableValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: the host reported a larger value on every retry (last {} bytes)",
            self.what, self.needed
        )
    }
}

impl std::error::Error for UnstableValue {}

/// A growable buffer for host reads.
#[derive(Debug)]
pub struct ReadBuf {
    buf: Vec<u8>,
}

impl Default for ReadBuf {
    fn default() -> Self {
        ReadBuf {
            buf: vec![0; INITIAL_LIMIT],
        }
    }
}

impl ReadBuf {
    /// A buffer of [`INITIAL_LIMIT`] bytes.
    pub fn new() -> Self {
        Self::default()
    }

    /// The current capacity offered to the host.
    pub fn limit(&self) -> usize {
        self.buf.len()
    }

    /// Reads one value: `call(buf)` must behave like a KSWE getter (write the value into `buf`
    /// only when it fits; return its length either way). Returns the value's bytes (empty when
    /// the host returned 0).
    pub fn read(
        &mut self,
        what: &'static str,
        mut call: impl FnMut(&mut [u8]) -> usize,
    ) -> Result<&[u8], UnstableValue> {
        let mut needed = call(&mut self.buf);
        for _ in 0..MAX_ATTEMPTS {
            if needed <= self.buf.len() {
                return Ok(&self.buf[..needed]);
            }
            self.buf.resize(needed, 0);
            needed = call(&mut self.buf);
        }
        if needed <= self.buf.len() {
            Ok(&self.buf[..needed])
        } else {
            Err(UnstableValue { what, needed })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A getter following the protocol for a fixed value, counting its calls.
    fn getter<'a>(value: &'a [u8], calls: &'a mut usize) -> impl FnMut(&mut [u8]) -> usize + 'a {
        move |buf: &mut [u8]| {
            *calls += 1;
            if value.len() <= buf.len() {
                buf[..value.len()].copy_from_slice(value);
            }
            value.len()
        }
    }

    #[test]
    fn short_values_take_one_call_and_long_ones_two() {
        let mut buf = ReadBuf::new();
        for (len, expected_calls, msg) in [
            (0, 1, "empty"),
            (10, 1, "fits"),
            (2048, 1, "exactly fits"),
            (5000, 2, "retry"),
        ] {
            let value: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let mut calls = 0;
            let got = buf.read("value", getter(&value, &mut calls)).unwrap().to_vec();
            assert_eq!((got, calls), (value, expected_calls), "{msg}");
        }
        assert_eq!(buf.limit(), 5000, "the buffer stays grown");
        let mut calls = 0;
        buf.read("value", getter(&[7; 3000], &mut calls)).unwrap();
        assert_eq!(calls, 1, "a grown buffer serves later reads in one call");
    }

    #[test]
    fn a_value_that_keeps_growing_is_an_error() {
        let mut buf = ReadBuf::new();
        let mut n = 4096;
        let err = buf
            .read("feed", |b: &mut [u8]| {
                n = b.len() + 1;
                n
            })
            .unwrap_err();
        assert_eq!(err.what, "feed");
        assert!(err.to_string().contains("larger value on every retry"), "{err}");
    }
}

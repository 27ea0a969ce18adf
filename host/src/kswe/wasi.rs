//! `wasi_snapshot_preview1` as wazero configures it for KSWE guests (`kswe-abi.md` §1.5): argv from
//! the plugin config with no implicit argv\[0\], no environment, no preopened files, stdout and
//! stderr captured per instance, fake clocks (+1 ms per reading) and a deterministic random source.
//!
//! Only stdio, args, environ, clocks, random, `sched_yield` and `proc_exit` do something. With no
//! preopens every path and socket function fails with `EBADF` (no valid directory or socket fd),
//! fd functions on other descriptors likewise, and the rest (`poll_oneoff`, `proc_raise`) return
//! `ENOSYS`. The random bytes differ from wazero's (Go `math/rand` seeded with 42): they come from
//! SplitMix64 seeded with 42, equally deterministic.

use wasmtime::{Caller, FuncType, Linker, Val};

use super::abi::MODULE_WASI;
use super::context::{GuestData, MAX_CAPTURED_OUTPUT};
use super::imports::{memory, read, write};
use super::table::WASI;
use super::trap::ProcExit;

type C<'a> = Caller<'a, GuestData>;

/// WASI errno values used here.
pub mod errno {
    /// Success.
    pub const SUCCESS: i32 = 0;
    /// Bad file descriptor.
    pub const EBADF: i32 = 8;
    /// Bad address (guest memory out of bounds).
    pub const EFAULT: i32 = 21;
    /// Invalid argument.
    pub const EINVAL: i32 = 28;
    /// Function not implemented.
    pub const ENOSYS: i32 = 52;
}

fn write_u32(c: &mut C<'_>, ptr: i32, v: u32) -> bool {
    write(c, ptr, &v.to_le_bytes())
}

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Adds the 46 WASI functions.
pub fn add_wasi(linker: &mut Linker<GuestData>) -> wasmtime::Result<()> {
    const M: &str = MODULE_WASI;
    linker.func_wrap(M, "args_sizes_get", |mut c: C<'_>, argc: i32, size: i32| {
        let args = c.data().shared.settings.args.clone();
        let total: usize = args.iter().map(|a| a.len() + 1).sum();
        if !write_u32(&mut c, argc, args.len() as u32) || !write_u32(&mut c, size, total as u32) {
            return errno::EFAULT;
        }
        errno::SUCCESS
    })?;
    linker.func_wrap(M, "args_get", |mut c: C<'_>, argv: i32, buf: i32| {
        let args = c.data().shared.settings.args.clone();
        let mut offset = buf as u32;
        for (i, arg) in args.iter().enumerate() {
            let mut bytes = arg.as_bytes().to_vec();
            bytes.push(0);
            if !write_u32(&mut c, argv.wrapping_add(4 * i as i32), offset)
                || !write(&mut c, offset as i32, &bytes)
            {
                return errno::EFAULT;
            }
            offset = offset.wrapping_add(bytes.len() as u32);
        }
        errno::SUCCESS
    })?;
    linker.func_wrap(M, "environ_sizes_get", |mut c: C<'_>, count: i32, size: i32| {
        if !write_u32(&mut c, count, 0) || !write_u32(&mut c, size, 0) {
            return errno::EFAULT;
        }
        errno::SUCCESS
    })?;
    linker.func_wrap(M, "environ_get", |_: C<'_>, _environ: i32, _buf: i32| {
        errno::SUCCESS
    })?;
    linker.func_wrap(M, "clock_res_get", |mut c: C<'_>, id: i32, out: i32| {
        let resolution: u64 = match id {
            0 => 1_000,
            1 => 1,
            _ => return errno::EINVAL,
        };
        if write(&mut c, out, &resolution.to_le_bytes()) {
            errno::SUCCESS
        } else {
            errno::EFAULT
        }
    })?;
    linker.func_wrap(
        M,
        "clock_time_get",
        |mut c: C<'_>, id: i32, _precision: i64, out: i32| {
            let wasi = &mut c.data_mut().wasi;
            let value = match id {
                0 => {
                    let v = wasi.walltime_ns;
                    wasi.walltime_ns += 1_000_000;
                    v
                }
                1 => {
                    let v = wasi.nanotime_ns;
                    wasi.nanotime_ns += 1_000_000;
                    v
                }
                _ => return errno::EINVAL,
            };
            if write(&mut c, out, &(value as u64).to_le_bytes()) {
                errno::SUCCESS
            } else {
                errno::EFAULT
            }
        },
    )?;
    linker.func_wrap(M, "random_get", |mut c: C<'_>, buf: i32, len: i32| {
        // Bounds first: the length is the guest's, up to 4 GiB (found by the kswe_imports fuzz
        // target: a 2 GiB buffer outside memory was allocated and filled before the check).
        let len = len as u32 as usize;
        let size = memory(&mut c).map_or(0, |m| m.data_size(&c));
        if (buf as u32 as usize)
            .checked_add(len)
            .is_none_or(|end| end > size)
        {
            return errno::EFAULT;
        }
        let mut bytes = vec![0u8; len];
        for chunk in bytes.chunks_mut(8) {
            let v = splitmix64(&mut c.data_mut().wasi.random_state).to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
        if write(&mut c, buf, &bytes) {
            errno::SUCCESS
        } else {
            errno::EFAULT
        }
    })?;
    linker.func_wrap(
        M,
        "fd_write",
        |mut c: C<'_>, fd: i32, iovs: i32, iovs_len: i32, nwritten: i32| {
            if fd != 1 && fd != 2 {
                return errno::EBADF;
            }
            let Some(table) = read(&mut c, iovs, iovs_len.wrapping_mul(8)) else {
                return errno::EFAULT;
            };
            let size = memory(&mut c).map_or(0, |m| m.data_size(&c));
            let mut total = 0u32;
            for iov in table.chunks_exact(8) {
                let ptr = u32::from_le_bytes([iov[0], iov[1], iov[2], iov[3]]);
                let len = u32::from_le_bytes([iov[4], iov[5], iov[6], iov[7]]);
                if (ptr as usize)
                    .checked_add(len as usize)
                    .is_none_or(|end| end > size)
                {
                    return errno::EFAULT;
                }
                // Only what the capture keeps is copied: a guest passing many large iovecs costs
                // the host one bounds check per iovec, not a copy of each.
                let room = MAX_CAPTURED_OUTPUT
                    .saturating_sub(c.data().out.len())
                    .min(len as usize);
                let Some(bytes) = read(&mut c, ptr as i32, room as i32) else {
                    return errno::EFAULT;
                };
                let data = c.data_mut();
                data.out.extend_from_slice(&bytes);
                data.out_dropped += u64::from(len) - room as u64;
                total = total.wrapping_add(len);
            }
            if write_u32(&mut c, nwritten, total) {
                errno::SUCCESS
            } else {
                errno::EFAULT
            }
        },
    )?;
    linker.func_wrap(
        M,
        "fd_read",
        |mut c: C<'_>, fd: i32, _iovs: i32, _iovs_len: i32, nread: i32| {
            // stdin is empty.
            if fd != 0 {
                return errno::EBADF;
            }
            if write_u32(&mut c, nread, 0) {
                errno::SUCCESS
            } else {
                errno::EFAULT
            }
        },
    )?;
    linker.func_wrap(M, "fd_close", |_: C<'_>, fd: i32| {
        if (0..=2).contains(&fd) {
            errno::SUCCESS
        } else {
            errno::EBADF
        }
    })?;
    linker.func_wrap(M, "fd_fdstat_get", |mut c: C<'_>, fd: i32, out: i32| {
        if !(0..=2).contains(&fd) {
            return errno::EBADF;
        }
        // filetype character device, no flags, no rights.
        let mut stat = [0u8; 24];
        stat[0] = 2;
        if write(&mut c, out, &stat) {
            errno::SUCCESS
        } else {
            errno::EFAULT
        }
    })?;
    linker.func_wrap(M, "sched_yield", |_: C<'_>| errno::SUCCESS)?;
    linker.func_wrap(M, "proc_exit", |_: C<'_>, code: i32| -> wasmtime::Result<()> {
        Err(wasmtime::Error::new(ProcExit(code as u32)))
    })?;
    let implemented = [
        "args_sizes_get",
        "args_get",
        "environ_sizes_get",
        "environ_get",
        "clock_res_get",
        "clock_time_get",
        "random_get",
        "fd_write",
        "fd_read",
        "fd_close",
        "fd_fdstat_get",
        "sched_yield",
        "proc_exit",
    ];
    for f in WASI.iter().filter(|f| !implemented.contains(&f.name)) {
        let ty = FuncType::new(
            linker.engine(),
            f.params.iter().map(|w| w.val()),
            f.results.iter().map(|w| w.val()),
        );
        let code = if matches!(f.name, "poll_oneoff" | "proc_raise") {
            errno::ENOSYS
        } else {
            errno::EBADF
        };
        linker.func_new(M, f.name, ty, move |_, _, results: &mut [Val]| {
            results[0] = Val::I32(code);
            Ok(())
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_is_deterministic() {
        let (mut a, mut b) = (42u64, 42u64);
        let xs: Vec<u64> = (0..4).map(|_| splitmix64(&mut a)).collect();
        let ys: Vec<u64> = (0..4).map(|_| splitmix64(&mut b)).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs[0], xs[1]);
    }
}

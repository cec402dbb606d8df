//! Throughput of functions measured side by side, for the parse parts.

use std::hint::black_box;
use std::time::{Duration, Instant};

/// MB/s of each of `fs` over `bytes` per call. The functions take turns in ~20 ms slices until
/// each has run for at least `min`, so a change in the machine's load (other processes) hits
/// all of them alike instead of whichever happened to run at the time.
pub(crate) fn throughputs<const N: usize>(
    bytes: usize,
    min: Duration,
    fs: [&dyn Fn() -> usize; N],
) -> [f64; N] {
    const SLICE: Duration = Duration::from_millis(20);
    let mut spent = [Duration::ZERO; N];
    let mut calls = [0u64; N];
    // One untimed call each warms caches and the allocator.
    for f in &fs {
        black_box(f());
    }
    while spent.iter().any(|s| *s < min) {
        for (i, f) in fs.iter().enumerate() {
            let started = Instant::now();
            loop {
                black_box(f());
                calls[i] += 1;
                if started.elapsed() >= SLICE {
                    break;
                }
            }
            spent[i] += started.elapsed();
        }
    }
    std::array::from_fn(|i| bytes as f64 * calls[i] as f64 / spent[i].as_secs_f64() / 1e6)
}

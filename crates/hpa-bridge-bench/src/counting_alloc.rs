//! The bench binary's global allocator: the system allocator, counting live bytes, live blocks
//! and live blocks per size class while counting is switched on, so that a phase's growth can
//! be read as bytes actually held (not resident pages, which include the allocator's slack).
//!
//! Off by default: a relaxed load per call is all the other parts pay. The memory part's child
//! process switches it on at its start and never off, so every delta it reads is exact.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering::Relaxed};

use serde::{Deserialize, Serialize};

pub struct Counting;

/// Blocks below this size are counted per [`GRANULE`]-byte class; larger ones per power of two.
const EXACT_LIMIT: usize = 64 * 1024;
const GRANULE: usize = 16;
const EXACT_CLASSES: usize = EXACT_LIMIT / GRANULE;
const CLASSES: usize = EXACT_CLASSES + usize::BITS as usize;

static ON: AtomicBool = AtomicBool::new(false);
static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);
static LIVE_BLOCKS: AtomicI64 = AtomicI64::new(0);
static PEAK_BYTES: AtomicI64 = AtomicI64::new(0);
static CLASS_BLOCKS: [AtomicI64; CLASSES] = [const { AtomicI64::new(0) }; CLASSES];
static CLASS_BYTES: [AtomicI64; CLASSES] = [const { AtomicI64::new(0) }; CLASSES];

fn class(size: usize) -> usize {
    if size < EXACT_LIMIT {
        size.div_ceil(GRANULE)
    } else {
        EXACT_CLASSES + (usize::BITS - size.leading_zeros()) as usize - 1
    }
}

/// The largest size a class holds (its label).
fn class_size(class: usize) -> usize {
    if class < EXACT_CLASSES {
        class * GRANULE
    } else {
        1 << (class - EXACT_CLASSES)
    }
}

fn count(size: usize, sign: i64) {
    let bytes = sign * size as i64;
    let live = LIVE_BYTES.fetch_add(bytes, Relaxed) + bytes;
    if sign > 0 {
        PEAK_BYTES.fetch_max(live, Relaxed);
    }
    LIVE_BLOCKS.fetch_add(sign, Relaxed);
    let c = class(size);
    CLASS_BLOCKS[c].fetch_add(sign, Relaxed);
    CLASS_BYTES[c].fetch_add(bytes, Relaxed);
}

// SAFETY: every call is passed to `System` unchanged; the counters are side effects that
// never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc(layout);
        if !p.is_null() && ON.load(Relaxed) {
            count(layout.size(), 1);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = System.alloc_zeroed(layout);
        if !p.is_null() && ON.load(Relaxed) {
            count(layout.size(), 1);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        if ON.load(Relaxed) {
            count(layout.size(), -1);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = System.realloc(ptr, layout, new_size);
        if !p.is_null() && ON.load(Relaxed) {
            count(layout.size(), -1);
            count(new_size, 1);
        }
        p
    }
}

/// Count from now on (for the rest of the process).
pub fn start() {
    ON.store(true, Relaxed);
}

/// The counters at one moment, and the C allocator's own view (glibc's `mallinfo2`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// Bytes requested and not yet freed since counting started.
    pub live_bytes: i64,
    pub live_blocks: i64,
    /// Per size class with blocks live: (largest size in the class, blocks, bytes).
    pub classes: Vec<(usize, i64, i64)>,
    /// VmRSS of this process.
    pub rss_bytes: u64,
    /// Chunks in use as the C allocator counts them (headers and rounding included), arenas
    /// and mmapped blocks together; 0 where `mallinfo2` is unavailable.
    pub malloc_in_use_bytes: u64,
    /// Free chunks held inside the C allocator's arenas.
    pub malloc_free_bytes: u64,
}

impl Snapshot {
    pub fn now() -> Snapshot {
        let classes = (0..CLASSES)
            .filter_map(|c| {
                let blocks = CLASS_BLOCKS[c].load(Relaxed);
                let bytes = CLASS_BYTES[c].load(Relaxed);
                (blocks != 0 || bytes != 0).then_some((class_size(c), blocks, bytes))
            })
            .collect();
        let (malloc_in_use_bytes, malloc_free_bytes) = malloc_info();
        Snapshot {
            live_bytes: LIVE_BYTES.load(Relaxed),
            live_blocks: LIVE_BLOCKS.load(Relaxed),
            classes,
            rss_bytes: super::memory().unwrap_or_default().0,
            malloc_in_use_bytes,
            malloc_free_bytes,
        }
    }

    /// Size classes whose live bytes changed from `earlier` to `self`, most bytes first:
    /// (largest size in the class, blocks, bytes).
    pub fn class_growth(&self, earlier: &Snapshot) -> Vec<(usize, i64, i64)> {
        let before: std::collections::HashMap<usize, (i64, i64)> = earlier
            .classes
            .iter()
            .map(|(s, n, b)| (*s, (*n, *b)))
            .collect();
        let mut out: Vec<(usize, i64, i64)> = self
            .classes
            .iter()
            .map(|(s, n, b)| {
                let (n0, b0) = before.get(s).copied().unwrap_or_default();
                (*s, n - n0, b - b0)
            })
            .filter(|(_, n, b)| *n != 0 || *b != 0)
            .collect();
        out.sort_by_key(|(_, _, b)| std::cmp::Reverse(*b));
        out
    }
}

/// The most live bytes since the last call (or since counting started), and starts the next
/// period from the bytes live now.
pub fn take_peak() -> i64 {
    PEAK_BYTES.swap(LIVE_BYTES.load(Relaxed), Relaxed)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod glibc {
    /// glibc's `struct mallinfo2` (malloc.h, glibc 2.33 and later).
    #[repr(C)]
    pub struct Mallinfo2 {
        pub arena: usize,
        pub ordblks: usize,
        pub smblks: usize,
        pub hblks: usize,
        pub hblkhd: usize,
        pub usmblks: usize,
        pub fsmblks: usize,
        pub uordblks: usize,
        pub fordblks: usize,
        pub keepcost: usize,
    }

    extern "C" {
        pub fn mallinfo2() -> Mallinfo2;
        pub fn malloc_trim(pad: usize) -> i32;
    }
}

/// (bytes in use, bytes free inside the arenas) as glibc counts them.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn malloc_info() -> (u64, u64) {
    // SAFETY: mallinfo2 takes no arguments and returns a plain struct by value.
    let m = unsafe { glibc::mallinfo2() };
    ((m.uordblks + m.hblkhd) as u64, m.fordblks as u64)
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn malloc_info() -> (u64, u64) {
    (0, 0)
}

/// Hand the C allocator's free pages back to the kernel (glibc's `malloc_trim`); what VmRSS
/// drops by is memory the allocator held but nothing used.
pub fn trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free memory of the allocator's own arenas.
    unsafe {
        glibc::malloc_trim(0);
    }
}

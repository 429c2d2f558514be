//! Live heap bytes told apart by the kind of thread that allocated them, so a benchmark that runs
//! the hub and its simulated spokes in one process can say what the hub holds.
//!
//! A thread is tagged when its runtime starts it (`tag_thread` from tokio's `on_thread_start`);
//! every allocation carries its tag in a header in front of it, so memory a hub thread allocated
//! is counted against the hub until it is freed, whichever thread frees it. Untagged threads (the
//! main thread, the control plane's SQLite writer) count as `Other`. Memory SQLite allocates
//! itself (its page cache) is not a Rust allocation and shows in the process's RSS only.
//!
//! With [`start_profile`], it is also a sampling heap profiler, as jemalloc's and tcmalloc's
//! are: every [`SAMPLE_BYTES`] that a thread of a profiled tag allocates, the allocation that
//! crosses the mark is kept with its backtrace until it is freed, and stands for
//! `SAMPLE_BYTES` (or its own size, when larger). [`snapshot`] counts the samples live now by
//! allocation site; [`report`] names the sites.

use std::alloc::{GlobalAlloc, Layout};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU8, Ordering};

/// The allocator under the tags: the one `fleetform`'s binary runs on (`src/main.rs`).
use mimalloc::MiMalloc;

/// Who allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tag {
    Hub = 0,
    Fleet = 1,
    Other = 2,
}

const TAGS: usize = 3;

thread_local! {
    static THREAD_TAG: Cell<u8> = const { Cell::new(Tag::Other as u8) };
}

static LIVE: [AtomicI64; TAGS] = [const { AtomicI64::new(0) }; TAGS];

/// Counts every allocation of this thread from now on against `tag`.
pub fn tag_thread(tag: Tag) {
    THREAD_TAG.with(|cell| cell.set(tag as u8));
}

/// Bytes allocated by `tag`'s threads and not yet freed (headers not counted).
pub fn live_bytes(tag: Tag) -> u64 {
    u64::try_from(LIVE[tag as usize].load(Ordering::Relaxed)).unwrap_or(0)
}

/// `live_bytes` of some tags together, in MiB.
pub fn live_mib(tags: &[Tag]) -> f64 {
    tags.iter().map(|&tag| live_bytes(tag)).sum::<u64>() as f64 / (1024.0 * 1024.0)
}

/// fleetform's allocator (mimalloc) with a tag in front of every block.
pub struct TaggedAllocator;

/// The header's size: at least the tag's byte, and a multiple of the block's alignment so the
/// block stays aligned.
fn header(layout: Layout) -> usize {
    layout.align().max(16)
}

fn current_tag() -> u8 {
    THREAD_TAG.try_with(Cell::get).unwrap_or(Tag::Other as u8)
}

fn count(tag: u8, delta: i64) {
    LIVE[usize::from(tag).min(TAGS - 1)].fetch_add(delta, Ordering::Relaxed);
}

fn signed(size: usize) -> i64 {
    i64::try_from(size).unwrap_or(i64::MAX)
}

// SAFETY: every block handed out is `header` bytes into a system block of `size + header` bytes
// at the same alignment; the tag lives in the byte just before the block, and `dealloc` and
// `realloc` find the system block again with the same `header(layout)`.
unsafe impl GlobalAlloc for TaggedAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let offset = header(layout);
        let Ok(outer) = Layout::from_size_align(layout.size() + offset, layout.align()) else {
            return std::ptr::null_mut();
        };
        // SAFETY: `outer` has a non-zero size.
        let base = unsafe { MiMalloc.alloc(outer) };
        if base.is_null() {
            return base;
        }
        let tag = current_tag();
        // SAFETY: `offset` ≥ 16 bytes lie inside the system block before the returned block.
        unsafe {
            let block = base.add(offset);
            block.sub(1).write(tag);
            let sampled = PROFILING.load(Ordering::Relaxed) && sample(tag, block, layout.size());
            block.sub(2).write(u8::from(sampled));
            count(tag, signed(layout.size()));
            block
        }
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        let offset = header(layout);
        // SAFETY: `block` came from `alloc` or `realloc` with this layout (GlobalAlloc's contract).
        unsafe {
            let tag = block.sub(1).read();
            if block.sub(2).read() == 1 {
                forget_sample(block, None);
            }
            count(tag, -signed(layout.size()));
            let outer = Layout::from_size_align_unchecked(layout.size() + offset, layout.align());
            MiMalloc.dealloc(block.sub(offset), outer);
        }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let offset = header(layout);
        // SAFETY: as `dealloc`; the system block keeps its alignment, so the header keeps its
        // size and the tag its place.
        unsafe {
            let tag = block.sub(1).read();
            let outer = Layout::from_size_align_unchecked(layout.size() + offset, layout.align());
            let sampled = block.sub(2).read() == 1;
            let base = MiMalloc.realloc(block.sub(offset), outer, new_size + offset);
            if base.is_null() {
                return base;
            }
            count(tag, signed(new_size) - signed(layout.size()));
            let moved = base.add(offset);
            if sampled {
                // The header moved with the block: it is still marked sampled.
                forget_sample(block, Some((moved, new_size)));
            }
            moved
        }
    }
}

/// Bytes a profiled thread allocates between two samples.
pub const SAMPLE_BYTES: i64 = 512 * 1024;

static PROFILING: AtomicBool = AtomicBool::new(false);
/// Which tags are profiled, by bit.
static PROFILED_TAGS: AtomicU8 = AtomicU8::new(0);

thread_local! {
    /// Set while the profiler itself runs on this thread: what it allocates is not sampled.
    static IN_PROFILER: Cell<bool> = const { Cell::new(false) };
    static UNTIL_SAMPLE: Cell<i64> = const { Cell::new(SAMPLE_BYTES) };
}

/// Sampled allocations live now and the sites they were made at.
#[derive(Default)]
struct Profile {
    /// Site id by its return addresses.
    sites: HashMap<Vec<usize>, usize>,
    /// Live sampled blocks: address → (size, site id).
    live: HashMap<usize, (usize, usize)>,
}

static PROFILE: Mutex<Option<Profile>> = Mutex::new(None);

/// Whether allocations are being sampled.
pub fn profiling() -> bool {
    PROFILING.load(Ordering::Relaxed)
}

/// Samples the allocations of `tags`' threads from now on.
pub fn start_profile(tags: &[Tag]) {
    let bits = tags.iter().fold(0u8, |bits, &tag| bits | (1 << tag as u8));
    PROFILED_TAGS.store(bits, Ordering::Relaxed);
    let _guard = Busy::enter();
    if let Ok(mut profile) = PROFILE.lock() {
        profile.get_or_insert_with(Profile::default);
    }
    PROFILING.store(true, Ordering::Relaxed);
}

/// Marks this thread busy in the profiler for as long as it lives.
struct Busy(bool);

impl Busy {
    fn enter() -> Busy {
        Busy(IN_PROFILER.with(|busy| busy.replace(true)))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        IN_PROFILER.with(|busy| busy.set(self.0));
    }
}

/// Whether this allocation is sampled (and then records it).
fn sample(tag: u8, block: *mut u8, size: usize) -> bool {
    if PROFILED_TAGS.load(Ordering::Relaxed) & (1 << tag) == 0
        || IN_PROFILER.try_with(Cell::get).unwrap_or(true)
    {
        return false;
    }
    let due = UNTIL_SAMPLE
        .try_with(|left| {
            let now = left.get() - signed(size);
            left.set(if now <= 0 { SAMPLE_BYTES } else { now });
            now <= 0
        })
        .unwrap_or(false);
    if !due {
        return false;
    }
    let _guard = Busy::enter();
    let mut frames = Vec::with_capacity(48);
    backtrace::trace(|frame| {
        frames.push(frame.ip() as usize);
        frames.len() < 48
    });
    let Ok(mut profile) = PROFILE.lock() else {
        return false;
    };
    let Some(profile) = profile.as_mut() else {
        return false;
    };
    let next = profile.sites.len();
    let site = *profile.sites.entry(frames).or_insert(next);
    profile.live.insert(block as usize, (size, site));
    true
}

/// A sampled block freed, or moved to `moved` with a new size.
fn forget_sample(block: *mut u8, moved: Option<(*mut u8, usize)>) {
    let _guard = Busy::enter();
    if let Ok(mut profile) = PROFILE.lock()
        && let Some(profile) = profile.as_mut()
        && let Some((_, site)) = profile.live.remove(&(block as usize))
        && let Some((to, size)) = moved
    {
        profile.live.insert(to as usize, (size, site));
    }
}

/// Estimated live bytes by allocation site, now.
pub fn snapshot() -> HashMap<usize, u64> {
    let _guard = Busy::enter();
    let mut bytes = HashMap::new();
    if let Ok(profile) = PROFILE.lock()
        && let Some(profile) = profile.as_ref()
    {
        for &(size, site) in profile.live.values() {
            let weight = u64::try_from(signed(size).max(SAMPLE_BYTES)).unwrap_or(0);
            *bytes.entry(site).or_insert(0) += weight;
        }
    }
    bytes
}

/// The `top` allocation sites of a snapshot, largest first, each named by the first `depth`
/// frames of its backtrace that are not the allocator's (sites that read the same that far are
/// one), with its estimated bytes.
pub fn report(snapshot: &HashMap<usize, u64>, top: usize, depth: usize) -> String {
    let _guard = Busy::enter();
    let stacks: HashMap<usize, Vec<usize>> = PROFILE
        .lock()
        .ok()
        .and_then(|profile| {
            profile.as_ref().map(|profile| {
                profile
                    .sites
                    .iter()
                    .map(|(ips, &site)| (site, ips.clone()))
                    .collect()
            })
        })
        .unwrap_or_default();
    let mut by_frames: HashMap<String, u64> = HashMap::new();
    for (site, &bytes) in snapshot {
        let frames = stacks
            .get(site)
            .map(|ips| named_frames(ips, depth).join(" < "))
            .unwrap_or_default();
        *by_frames.entry(frames).or_insert(0) += bytes;
    }
    let total: u64 = by_frames.values().sum();
    let mut sites: Vec<(String, u64)> = by_frames.into_iter().collect();
    sites.sort_by_key(|(_, bytes)| std::cmp::Reverse(*bytes));
    let mut out = format!(
        "sampled heap: {:.0} MiB live (one sample per {} KiB allocated)\n",
        total as f64 / 1048576.0,
        SAMPLE_BYTES / 1024
    );
    for (frames, bytes) in sites.into_iter().take(top) {
        out.push_str(&format!(
            "{:>8.1} MiB {:>5.1}%  {frames}\n",
            bytes as f64 / 1048576.0,
            bytes as f64 * 100.0 / total.max(1) as f64,
        ));
    }
    out
}

/// The names of the frames at `ips` that say who allocated: not the allocator's own, nor
/// the standard library's collections and formatting.
fn named_frames(ips: &[usize], depth: usize) -> Vec<String> {
    const PLUMBING: [&str; 10] = [
        "backtrace::",
        "alloc::",
        "<alloc::",
        "core::",
        "<core::",
        "std::",
        "__rust",
        "hashbrown::",
        "serde",
        "<serde",
    ];
    let mut names = Vec::new();
    for &ip in ips {
        backtrace::resolve(ip as *mut std::ffi::c_void, |symbol| {
            if let Some(name) = symbol.name() {
                let name = format!("{name:#}");
                let plumbing =
                    name.contains("::heap::") || PLUMBING.iter().any(|p| name.starts_with(p));
                if !plumbing && names.last() != Some(&name) {
                    names.push(name);
                }
            }
        });
        if names.len() >= depth {
            break;
        }
    }
    names
}

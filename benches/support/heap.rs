//! Live heap bytes told apart by the kind of thread that allocated them, so a benchmark that runs
//! the hub and its simulated spokes in one process can say what the hub holds.
//!
//! A thread is tagged when its runtime starts it (`tag_thread` from tokio's `on_thread_start`);
//! every allocation carries its tag in a header in front of it, so memory a hub thread allocated
//! is counted against the hub until it is freed, whichever thread frees it. Untagged threads (the
//! main thread, the control plane's SQLite writer) count as `Other`. Memory SQLite allocates
//! itself (its page cache) is not a Rust allocation and shows in the process's RSS only.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicI64, Ordering};

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

/// The system allocator with a tag in front of every block.
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
        let base = unsafe { System.alloc(outer) };
        if base.is_null() {
            return base;
        }
        let tag = current_tag();
        // SAFETY: `offset` ≥ 16 bytes lie inside the system block before the returned block.
        unsafe {
            let block = base.add(offset);
            block.sub(1).write(tag);
            count(tag, signed(layout.size()));
            block
        }
    }

    unsafe fn dealloc(&self, block: *mut u8, layout: Layout) {
        let offset = header(layout);
        // SAFETY: `block` came from `alloc` or `realloc` with this layout (GlobalAlloc's contract).
        unsafe {
            let tag = block.sub(1).read();
            count(tag, -signed(layout.size()));
            let outer = Layout::from_size_align_unchecked(layout.size() + offset, layout.align());
            System.dealloc(block.sub(offset), outer);
        }
    }

    unsafe fn realloc(&self, block: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let offset = header(layout);
        // SAFETY: as `dealloc`; the system block keeps its alignment, so the header keeps its
        // size and the tag its place.
        unsafe {
            let tag = block.sub(1).read();
            let outer = Layout::from_size_align_unchecked(layout.size() + offset, layout.align());
            let base = System.realloc(block.sub(offset), outer, new_size + offset);
            if base.is_null() {
                return base;
            }
            count(tag, signed(new_size) - signed(layout.size()));
            base.add(offset)
        }
    }
}

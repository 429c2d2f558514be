//! The in-memory backend: nothing survives the process. Used when no data directory is given.

use std::sync::Arc;

use super::{Backend, Event, Loaded, StorageError};

/// Keeps nothing; the store's cache is the only copy.
pub struct MemoryBackend;

impl Backend for MemoryBackend {
    fn load(&mut self) -> Result<Loaded, StorageError> {
        Ok(Loaded::default())
    }

    fn commit(&mut self, _batch: &[Arc<Event>], _compact_below: i64) -> Result<(), StorageError> {
        Ok(())
    }
}

//! The SQLite backend: one database file in the data directory, in WAL mode with
//! `synchronous=FULL`, so a committed batch is on disk before any write in it is acknowledged.
//!
//! Tables: `meta` (format marker, last resourceVersion, compaction point), `objects` (current
//! objects) and `history` (recent events, compacted to the store's window). The database is
//! opened with an exclusive lock so two control planes cannot share a directory.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;

use super::{Backend, Event, EventType, Loaded, StorageError};
use crate::private_files;

/// The value of `meta.format` that marks a database as ours.
const FORMAT: &str = "fleetform-controlplane/1";
/// The database file inside the data directory.
pub const DB_FILE: &str = "controlplane.db";

/// A durable backend on one SQLite file.
pub struct SqliteBackend {
    conn: Connection,
    dir: String,
}

fn classify(dir: &str, e: rusqlite::Error) -> StorageError {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::NotADatabase) | Some(rusqlite::ErrorCode::DatabaseCorrupt) => {
            StorageError::Corrupt {
                dir: dir.to_string(),
                detail: e.to_string(),
            }
        }
        Some(rusqlite::ErrorCode::DatabaseBusy) | Some(rusqlite::ErrorCode::DatabaseLocked) => {
            StorageError::InUse {
                dir: dir.to_string(),
            }
        }
        _ => StorageError::Sqlite(e),
    }
}

/// The database and the files SQLite keeps beside it, all of which hold objects.
fn state_files(db: &Path) -> [PathBuf; 3] {
    let with = |suffix: &str| {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    };
    [db.to_path_buf(), with("-wal"), with("-shm")]
}

impl SqliteBackend {
    /// Opens (or creates) the store in `dir`, refusing foreign or corrupt contents.
    pub fn open(dir: &Path) -> Result<Self, StorageError> {
        let dir_s = dir.display().to_string();
        private_files::create_or_check_dir("data directory", dir)?;
        let path: PathBuf = dir.join(DB_FILE);
        let fresh = !path.exists();
        if !fresh {
            for file in state_files(&path).iter().filter(|f| f.exists()) {
                private_files::check("database", file, private_files::FILE_MODE)?;
            }
        }
        if fresh {
            let others: Vec<String> = std::fs::read_dir(dir)
                .map_err(|e| StorageError::DataDir {
                    dir: dir_s.clone(),
                    message: e.to_string(),
                })?
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect();
            if !others.is_empty() {
                return Err(StorageError::Foreign {
                    dir: dir_s,
                    detail: format!(
                        "no {DB_FILE} but other files ({}); use an empty or new directory",
                        others.join(", ")
                    ),
                });
            }
        }
        if fresh {
            // Created owner-only before SQLite opens it: SQLite gives its -wal and -shm files
            // the database file's mode, and an empty file is an empty database.
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(private_files::FILE_MODE)
                .open(&path)
                .map_err(|e| StorageError::DataDir {
                    dir: dir_s.clone(),
                    message: format!("cannot create {}: {e}", path.display()),
                })?;
        }
        let conn = Connection::open(&path).map_err(|e| classify(&dir_s, e))?;
        let setup = |conn: &Connection| -> rusqlite::Result<()> {
            conn.busy_timeout(std::time::Duration::from_millis(0))?;
            conn.pragma_update(None, "locking_mode", "EXCLUSIVE")?;
            conn.pragma_update(None, "journal_mode", "WAL")?;
            conn.pragma_update(None, "synchronous", "FULL")?;
            Ok(())
        };
        setup(&conn).map_err(|e| classify(&dir_s, e))?;
        let check: String = conn
            .query_row("PRAGMA quick_check", [], |r| r.get(0))
            .map_err(|e| classify(&dir_s, e))?;
        if check != "ok" {
            return Err(StorageError::Corrupt {
                dir: dir_s,
                detail: check,
            });
        }
        if fresh {
            conn.execute_batch(
                "BEGIN;
                 CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
                 CREATE TABLE objects(key TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
                     rv INTEGER NOT NULL, body TEXT NOT NULL, PRIMARY KEY(key, namespace, name)) WITHOUT ROWID;
                 CREATE TABLE history(rv INTEGER PRIMARY KEY, key TEXT NOT NULL, namespace TEXT NOT NULL,
                     name TEXT NOT NULL, type TEXT NOT NULL, body TEXT NOT NULL);
                 COMMIT;",
            )
            .map_err(|e| classify(&dir_s, e))?;
            conn.execute(
                "INSERT INTO meta(key, value) VALUES ('format', ?1), ('rv', '0'), ('compacted_rv', '0')",
                params![FORMAT],
            )
            .map_err(|e| classify(&dir_s, e))?;
        } else {
            let format: Option<String> = conn
                .query_row("SELECT value FROM meta WHERE key = 'format'", [], |r| {
                    r.get(0)
                })
                .optional()
                .unwrap_or(None);
            match format {
                Some(f) if f == FORMAT => {}
                Some(f) => {
                    return Err(StorageError::Foreign {
                        dir: dir_s,
                        detail: format!("format {f:?}, expected {FORMAT:?}"),
                    });
                }
                None => {
                    return Err(StorageError::Foreign {
                        dir: dir_s,
                        detail: "no fleetform format marker".into(),
                    });
                }
            }
        }
        // SQLite creates -wal and -shm itself; whatever mode they got, they are made private.
        for file in state_files(&path).iter().filter(|f| f.exists()) {
            private_files::set_mode(file, private_files::FILE_MODE)?;
        }
        Ok(SqliteBackend { conn, dir: dir_s })
    }

    fn meta_i64(&self, key: &str) -> Result<i64, StorageError> {
        let v: String = self
            .conn
            .query_row("SELECT value FROM meta WHERE key = ?1", params![key], |r| {
                r.get(0)
            })
            .map_err(|e| classify(&self.dir, e))?;
        v.parse().map_err(|_| StorageError::Corrupt {
            dir: self.dir.clone(),
            detail: format!("meta.{key} is not a number: {v:?}"),
        })
    }
}

impl Backend for SqliteBackend {
    fn load(&mut self) -> Result<Loaded, StorageError> {
        let rv = self.meta_i64("rv")?;
        let compacted_rv = self.meta_i64("compacted_rv")?;
        let mut objects = Vec::new();
        {
            let mut stmt = self
                .conn
                .prepare("SELECT key, namespace, name, body FROM objects")?;
            let rows = stmt.query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                ))
            })?;
            for row in rows {
                let (k, ns, name, body) = row?;
                objects.push((k, ns, name, serde_json::from_str::<Value>(&body)?));
            }
        }
        let mut history = Vec::new();
        {
            let mut stmt = self.conn.prepare(
                "SELECT rv, key, namespace, name, type, body FROM history WHERE rv > ?1 ORDER BY rv",
            )?;
            let rows = stmt.query_map(params![compacted_rv], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                    r.get::<_, String>(5)?,
                ))
            })?;
            for row in rows {
                let (erv, key, namespace, name, kind, body) = row?;
                let kind = EventType::parse(&kind).ok_or_else(|| StorageError::Corrupt {
                    dir: self.dir.clone(),
                    detail: format!("history event {erv} has unknown type {kind:?}"),
                })?;
                history.push(Event {
                    rv: erv,
                    key: Arc::from(key.as_str()),
                    namespace,
                    name,
                    kind,
                    object: {
                        serde_json::from_str::<serde::de::IgnoredAny>(&body)?;
                        bytes::Bytes::from(body)
                    },
                    prev: None,
                    head: Default::default(),
                });
            }
        }
        Ok(Loaded {
            rv,
            compacted_rv,
            objects,
            history,
        })
    }

    fn commit(&mut self, batch: &[Arc<Event>], compact_below: i64) -> Result<(), StorageError> {
        let tx = self.conn.transaction()?;
        {
            let mut upsert = tx.prepare_cached(
                "INSERT INTO objects(key, namespace, name, rv, body) VALUES (?1, ?2, ?3, ?4, ?5)
                 ON CONFLICT(key, namespace, name) DO UPDATE SET rv = excluded.rv, body = excluded.body",
            )?;
            let mut delete = tx.prepare_cached(
                "DELETE FROM objects WHERE key = ?1 AND namespace = ?2 AND name = ?3",
            )?;
            let mut hist = tx.prepare_cached(
                "INSERT INTO history(rv, key, namespace, name, type, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )?;
            let mut last = 0;
            for e in batch {
                let body = std::str::from_utf8(&e.object).unwrap_or("null");
                match e.kind {
                    EventType::Deleted => {
                        delete.execute(params![&*e.key, e.namespace, e.name])?;
                    }
                    _ => {
                        upsert.execute(params![&*e.key, e.namespace, e.name, e.rv, body])?;
                    }
                }
                hist.execute(params![
                    e.rv,
                    &*e.key,
                    e.namespace,
                    e.name,
                    e.kind.as_str(),
                    body
                ])?;
                last = e.rv;
            }
            tx.execute(
                "UPDATE meta SET value = ?1 WHERE key = 'rv'",
                params![last.to_string()],
            )?;
            if compact_below > 0 {
                tx.execute("DELETE FROM history WHERE rv <= ?1", params![compact_below])?;
                tx.execute(
                    "UPDATE meta SET value = ?1 WHERE key = 'compacted_rv' AND CAST(value AS INTEGER) < ?1",
                    params![compact_below],
                )?;
            }
        }
        tx.commit()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(rv: i64, name: &str, kind: EventType) -> Arc<Event> {
        Arc::new(Event {
            rv,
            key: Arc::from("/configmaps"),
            namespace: "ns".into(),
            name: name.into(),
            kind,
            object: bytes::Bytes::from(
                json!({"metadata": {"name": name, "resourceVersion": rv.to_string()}}).to_string(),
            ),
            prev: None,
            head: Default::default(),
        })
    }

    /// A new owner-only data directory in `tmp`.
    fn data_dir(tmp: &tempfile::TempDir) -> PathBuf {
        let dir = tmp.path().join("data");
        private_files::create_or_check_dir("data directory", &dir).unwrap();
        dir
    }

    #[test]
    fn committed_batches_are_read_back() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("data");
        let mut b = SqliteBackend::open(&dir).unwrap();
        b.commit(
            &[
                event(1, "a", EventType::Added),
                event(2, "b", EventType::Added),
                event(3, "a", EventType::Deleted),
            ],
            0,
        )
        .unwrap();
        drop(b);
        let mut b = SqliteBackend::open(&dir).unwrap();
        let loaded = b.load().unwrap();
        assert_eq!(loaded.rv, 3);
        assert_eq!(loaded.objects.len(), 1);
        assert_eq!(loaded.history.len(), 3);
    }

    #[test]
    fn a_foreign_directory_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = data_dir(&tmp);
        std::fs::write(dir.join("member"), "etcd").unwrap();
        let err = SqliteBackend::open(&dir).err().unwrap();
        assert!(matches!(err, StorageError::Foreign { .. }), "{err}");
    }

    #[test]
    fn a_corrupt_database_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = data_dir(&tmp);
        std::fs::write(dir.join(DB_FILE), vec![0x5a; 8192]).unwrap();
        private_files::set_mode(&dir.join(DB_FILE), private_files::FILE_MODE).unwrap();
        let err = SqliteBackend::open(&dir).err().unwrap();
        assert!(matches!(err, StorageError::Corrupt { .. }), "{err}");
    }

    #[test]
    fn another_sqlite_database_is_foreign() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = data_dir(&tmp);
        let c = Connection::open(dir.join(DB_FILE)).unwrap();
        c.execute_batch("CREATE TABLE t(x); INSERT INTO t VALUES (1);")
            .unwrap();
        drop(c);
        private_files::set_mode(&dir.join(DB_FILE), private_files::FILE_MODE).unwrap();
        let err = SqliteBackend::open(&dir).err().unwrap();
        assert!(matches!(err, StorageError::Foreign { .. }), "{err}");
    }
}

//! What is wrong with a fleet repo, and where.

use std::fmt;

use serde::Serialize;

use std::sync::{Arc, OnceLock};

use super::yaml::{Position, SpanIndex};

/// One problem found in a fleet repo: the file, the place in it, the JSON pointer of the node
/// inside its document, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Diagnostic {
    /// Path of the file, relative to the fleet root, with `/` separators.
    pub file: String,
    pub line: usize,
    pub column: usize,
    /// 0-based index of the document within its file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub document: Option<usize>,
    /// JSON pointer of the offending node within its document ("" for the whole document).
    pub pointer: String,
    pub message: String,
}

impl Diagnostic {
    /// A problem with a whole file (it could not be read or parsed as a whole).
    pub fn file(file: &str, position: Position, message: impl Into<String>) -> Self {
        Diagnostic {
            file: file.to_string(),
            line: position.line,
            column: position.column,
            document: None,
            pointer: String::new(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file, self.line, self.column)?;
        if !self.pointer.is_empty() {
            write!(f, "{}: ", self.pointer)?;
        }
        f.write_str(&self.message)
    }
}

/// The text of a file and, once needed, where every node of its documents is. Files are
/// parsed without positions first; only a file with something to point at is parsed again.
#[derive(Debug)]
pub struct FileSpans {
    text: String,
    spans: OnceLock<Vec<SpanIndex>>,
}

impl FileSpans {
    pub fn new(text: &str) -> Arc<Self> {
        Arc::new(FileSpans {
            text: text.to_string(),
            spans: OnceLock::new(),
        })
    }

    fn document(&self, index: usize) -> &SpanIndex {
        static NONE: OnceLock<SpanIndex> = OnceLock::new();
        let spans = self.spans.get_or_init(|| {
            super::yaml::parse_documents(&self.text)
                .map(|documents| {
                    documents
                        .into_iter()
                        .map(|document| document.spans)
                        .collect()
                })
                .unwrap_or_default()
        });
        spans
            .get(index)
            .unwrap_or_else(|| NONE.get_or_init(SpanIndex::default))
    }
}

/// Where a document came from, for diagnostics about its nodes.
#[derive(Clone, Debug)]
pub struct DocumentOrigin {
    pub file: String,
    pub index: usize,
    pub source: Arc<FileSpans>,
}

impl DocumentOrigin {
    fn spans(&self) -> &SpanIndex {
        self.source.document(self.index)
    }

    /// A problem with the value at `pointer`.
    pub fn at(&self, pointer: &str, message: impl Into<String>) -> Diagnostic {
        self.diagnostic(pointer, self.spans().value(pointer), message)
    }

    /// A problem with the key of the mapping entry at `pointer` (unknown or misspelt fields).
    pub fn at_key(&self, pointer: &str, message: impl Into<String>) -> Diagnostic {
        self.diagnostic(pointer, self.spans().key(pointer), message)
    }

    /// Where the value at `pointer` is written, as `file:line:column`.
    pub fn location(&self, pointer: &str) -> String {
        let position = self.spans().value(pointer);
        format!("{}:{}:{}", self.file, position.line, position.column)
    }

    fn diagnostic(
        &self,
        pointer: &str,
        position: Position,
        message: impl Into<String>,
    ) -> Diagnostic {
        Diagnostic {
            file: self.file.clone(),
            line: position.line,
            column: position.column,
            document: Some(self.index),
            pointer: pointer.to_string(),
            message: message.into(),
        }
    }
}

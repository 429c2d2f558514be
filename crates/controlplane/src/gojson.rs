//! JSON syntax errors worded as Go's `encoding/json` words them. kube-apiserver decodes request
//! bodies, patches and continue tokens with it, and clients see its words in the Status
//! message ("unexpected end of JSON input", "invalid character 'o' in literal null (expecting
//! 'u')"), so the embedded server checks syntax the way Go's scanner does before it parses.
//!
//! Pure: bytes in, the first syntax error out.

/// Go's message for the first syntax error of `data`, or None when it is valid JSON.
pub fn syntax_error(data: &[u8]) -> Option<String> {
    let mut scan = Scanner {
        data,
        at: 0,
        depth: 0,
    };
    scan.value().and_then(|()| scan.end_top()).err()
}

struct Scanner<'a> {
    data: &'a [u8],
    at: usize,
    depth: usize,
}

/// Go's `maxNestingDepth`.
const MAX_DEPTH: usize = 10_000;

const END: &str = "unexpected end of JSON input";

fn invalid(c: u8, context: &str) -> String {
    format!("invalid character {} {context}", quote_char(c))
}

/// Go's `quoteChar`: the byte as a rune, in single quotes, escaped as `strconv.Quote` would.
fn quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".into(),
        b'"' => "'\"'".into(),
        0x07 => r"'\a'".into(),
        0x08 => r"'\b'".into(),
        0x0c => r"'\f'".into(),
        b'\n' => r"'\n'".into(),
        b'\r' => r"'\r'".into(),
        b'\t' => r"'\t'".into(),
        0x0b => r"'\v'".into(),
        b'\\' => r"'\\'".into(),
        c if c < 0x20 || c == 0x7f => format!(r"'\x{c:02x}'"),
        c if (0x80..0xa0).contains(&c) => format!(r"'\u{c:04x}'"),
        c => format!("'{}'", char::from(c)),
    }
}

fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.data.get(self.at).copied()
    }

    fn next(&mut self) -> Result<u8, String> {
        let c = self.peek().ok_or_else(|| END.to_string())?;
        self.at += 1;
        Ok(c)
    }

    fn skip_space(&mut self) {
        while self.peek().is_some_and(is_space) {
            self.at += 1;
        }
    }

    fn value(&mut self) -> Result<(), String> {
        self.skip_space();
        let c = self.next()?;
        match c {
            b'{' => self.object(),
            b'[' => self.array(),
            b'"' => self.string(),
            b'-' => self.number(c),
            b'0'..=b'9' => self.number(c),
            b't' => self.literal("true"),
            b'f' => self.literal("false"),
            b'n' => self.literal("null"),
            c => Err(invalid(c, "looking for beginning of value")),
        }
    }

    fn nest(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err("exceeded max depth".into());
        }
        Ok(())
    }

    fn object(&mut self) -> Result<(), String> {
        self.nest()?;
        self.skip_space();
        if self.peek() == Some(b'}') {
            self.at += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            self.skip_space();
            match self.next()? {
                b'"' => self.string()?,
                c => return Err(invalid(c, "looking for beginning of object key string")),
            }
            self.skip_space();
            match self.next()? {
                b':' => {}
                c => return Err(invalid(c, "after object key")),
            }
            self.value()?;
            self.skip_space();
            match self.next()? {
                b',' => {}
                b'}' => {
                    self.depth -= 1;
                    return Ok(());
                }
                c => return Err(invalid(c, "after object key:value pair")),
            }
        }
    }

    fn array(&mut self) -> Result<(), String> {
        self.nest()?;
        self.skip_space();
        if self.peek() == Some(b']') {
            self.at += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            self.value()?;
            self.skip_space();
            match self.next()? {
                b',' => {}
                b']' => {
                    self.depth -= 1;
                    return Ok(());
                }
                c => return Err(invalid(c, "after array element")),
            }
        }
    }

    fn string(&mut self) -> Result<(), String> {
        loop {
            match self.next()? {
                b'"' => return Ok(()),
                b'\\' => match self.next()? {
                    b'b' | b'f' | b'n' | b'r' | b't' | b'\\' | b'/' | b'"' => {}
                    b'u' => {
                        for _ in 0..4 {
                            let c = self.next()?;
                            if !c.is_ascii_hexdigit() {
                                return Err(invalid(c, "in \\u hexadecimal character escape"));
                            }
                        }
                    }
                    c => return Err(invalid(c, "in string escape code")),
                },
                c if c < 0x20 => return Err(invalid(c, "in string literal")),
                _ => {}
            }
        }
    }

    /// A number whose first byte `first` was read; its end is whatever may follow a value.
    fn number(&mut self, first: u8) -> Result<(), String> {
        let mut c = first;
        if c == b'-' {
            c = self.next()?;
            if !c.is_ascii_digit() {
                return Err(invalid(c, "in numeric literal"));
            }
        }
        if c != b'0' {
            while self.peek().is_some_and(|d| d.is_ascii_digit()) {
                self.at += 1;
            }
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            let d = self.next()?;
            if !d.is_ascii_digit() {
                return Err(invalid(d, "after decimal point in numeric literal"));
            }
            while self.peek().is_some_and(|d| d.is_ascii_digit()) {
                self.at += 1;
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            let mut d = self.next()?;
            if d == b'+' || d == b'-' {
                d = self.next()?;
            }
            if !d.is_ascii_digit() {
                return Err(invalid(d, "in exponent of numeric literal"));
            }
            while self.peek().is_some_and(|d| d.is_ascii_digit()) {
                self.at += 1;
            }
        }
        Ok(())
    }

    fn literal(&mut self, word: &str) -> Result<(), String> {
        for expected in word.bytes().skip(1) {
            let c = self.next()?;
            if c != expected {
                return Err(invalid(
                    c,
                    &format!("in literal {word} (expecting {})", quote_char(expected)),
                ));
            }
        }
        Ok(())
    }

    fn end_top(&mut self) -> Result<(), String> {
        self.skip_space();
        match self.peek() {
            None => Ok(()),
            Some(c) => Err(invalid(c, "after top-level value")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::syntax_error;

    #[test]
    fn valid_documents_have_no_error() {
        for ok in [
            r#"{"a":[1,-2.5e+3,true,false,null,"x\u00e9\n"]}"#,
            " [] ",
            "0",
            r#""""#,
        ] {
            assert_eq!(syntax_error(ok.as_bytes()), None, "{ok}");
        }
    }

    #[test]
    fn errors_are_worded_as_go_words_them() {
        let cases = [
            (
                r#"{"apiVersion":"v1","metadata":{"name":"#,
                "unexpected end of JSON input",
            ),
            (
                "not-a-token",
                "invalid character 'o' in literal null (expecting 'u')",
            ),
            (
                "{'a':1}",
                r"invalid character '\'' looking for beginning of object key string",
            ),
            (r#"{"a" 1}"#, "invalid character '1' after object key"),
            (
                r#"{"a":1 "b":2}"#,
                "invalid character '\"' after object key:value pair",
            ),
            ("[1 2]", "invalid character '2' after array element"),
            ("{} x", "invalid character 'x' after top-level value"),
            (
                "1.x",
                "invalid character 'x' after decimal point in numeric literal",
            ),
            ("-x", "invalid character 'x' in numeric literal"),
            (
                "1ex",
                "invalid character 'x' in exponent of numeric literal",
            ),
            ("\"a\tb\"", r"invalid character '\t' in string literal"),
            (r#""\q""#, "invalid character 'q' in string escape code"),
            (
                r#""\u12g4""#,
                r"invalid character 'g' in \u hexadecimal character escape",
            ),
            ("", "unexpected end of JSON input"),
            ("}", "invalid character '}' looking for beginning of value"),
        ];
        for (input, message) in cases {
            assert_eq!(
                syntax_error(input.as_bytes()).as_deref(),
                Some(message),
                "{input}"
            );
        }
    }
}

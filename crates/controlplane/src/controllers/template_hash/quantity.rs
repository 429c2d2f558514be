//! A `resource.Quantity` as kube-controller-manager holds it in memory: what apimachinery's
//! parser makes of the string kube-apiserver stored, which is the canonical form of what the
//! client wrote unless the parser kept the client's own string. The template hash prints these
//! internals (the scaled integer or the decimal, the kept string, the format).
//!
//! Values whose decimal form needs more than 127 bits are not modelled ([`parse`] answers
//! `None`); kube-apiserver caps binary quantities at 2^63-1, so only absurd decimal ones are.

/// How a quantity is written back: `Format` in apimachinery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    DecimalExponent,
    BinarySI,
    DecimalSI,
}

impl Format {
    pub fn as_str(self) -> &'static str {
        match self {
            Format::DecimalExponent => "DecimalExponent",
            Format::BinarySI => "BinarySI",
            Format::DecimalSI => "DecimalSI",
        }
    }
}

/// The amount: a scaled int64 (`value * 10^scale`) where it fits, else a decimal
/// (`unscaled * 10^-scale`, inf.Dec's upside-down scale).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amount {
    Int { value: i64, scale: i32 },
    Dec { unscaled: i128, scale: i32 },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quantity {
    pub amount: Amount,
    /// The string the parser kept (it does for input already in canonical form), or empty.
    pub kept: String,
    pub format: Format,
}

/// The largest number of decimal digits an int64 amount is parsed from.
const MAX_INT64_FACTORS: i32 = 18;
/// Nano: the finest scale an int64 amount has.
const NANO: i32 = -9;

/// What kube-controller-manager holds for a quantity a client wrote as `input`: kube-apiserver
/// parses it and stores the kept string or else the canonical form, which the controller's
/// client parses again.
pub fn as_controller_sees(input: &str) -> Option<Quantity> {
    let first = parse(input)?;
    if !first.kept.is_empty() {
        return Some(first);
    }
    parse(&canonical(&first)?)
}

/// apimachinery's `ParseQuantity`.
pub fn parse(input: &str) -> Option<Quantity> {
    if input.is_empty() {
        return None;
    }
    if input == "0" {
        return Some(Quantity {
            amount: Amount::Int { value: 0, scale: 0 },
            kept: input.to_string(),
            format: Format::DecimalSI,
        });
    }
    let parts = split(input)?;
    let (base, exponent, format) = interpret(parts.suffix)?;
    let digits = (parts.num.len() + parts.denom.len()) as i32;
    let (mut scale, precision, mantissa) = match format {
        Format::DecimalExponent | Format::DecimalSI => (exponent, MAX_INT64_FACTORS - digits, 1),
        Format::BinarySI if exponent >= 0 && parts.denom.is_empty() => {
            // About 3 decimal digits per factor of 1024.
            let precision = 15 - parts.num.len() as i32 - exponent * 3 / 10 - 1;
            (0, precision, 1i64 << exponent)
        }
        Format::BinarySI => (0, -1, 1),
    };
    if precision >= 0 {
        scale -= parts.denom.len() as i32;
        if scale >= NANO {
            let shifted = format!("{}{}", parts.num, parts.denom);
            let value: i64 = shifted.parse().ok()?;
            if let Some(product) = value.checked_mul(mantissa) {
                let result = if parts.positive { product } else { -product };
                // The input is kept where it is already the canonical form.
                let canonical = match format {
                    Format::BinarySI => exponent % 10 == 0 && value & 0x07 != 0,
                    _ => scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0'),
                };
                return Some(Quantity {
                    amount: Amount::Int {
                        value: result,
                        scale,
                    },
                    kept: if canonical {
                        input.to_string()
                    } else {
                        String::new()
                    },
                    format,
                });
            }
        }
    }
    parse_decimal(parts.value, base, exponent, format)
}

/// The inf.Dec path of `ParseQuantity`: exact, then rounded up to nano and capped.
fn parse_decimal(value: &str, base: i32, exponent: i32, mut format: Format) -> Option<Quantity> {
    let (negative, unsigned) = match value.as_bytes().first()? {
        b'-' => (true, &value[1..]),
        b'+' => (false, &value[1..]),
        _ => (false, value),
    };
    let (int_part, frac) = unsigned.split_once('.').unwrap_or((unsigned, ""));
    let digits = format!("{int_part}{frac}");
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut unscaled: i128 = digits.parse().ok()?;
    let mut scale = frac.len() as i32;
    if base == 10 {
        scale -= exponent;
    } else {
        unscaled = unscaled.checked_mul(1i128 << exponent)?;
    }
    if unscaled != 0 {
        // Rounded (up, away from zero) to nano: inf.Dec's scale 9.
        if scale <= 9 {
            unscaled = unscaled.checked_mul(pow10(9 - scale)?)?;
        } else {
            let divisor = pow10(scale - 9);
            unscaled = match divisor {
                Some(d) => unscaled / d + i128::from(unscaled % d != 0),
                None => 1,
            };
        }
        scale = 9;
    }
    let max = i128::from(i64::MAX);
    if format == Format::BinarySI && unscaled > max * pow10(scale.max(0))? {
        unscaled = max;
        scale = 0;
    }
    if format == Format::BinarySI && unscaled > 0 && scale >= 0 && unscaled < pow10(scale)? {
        format = Format::DecimalSI;
    }
    Some(Quantity {
        amount: Amount::Dec {
            unscaled: if negative { -unscaled } else { unscaled },
            scale,
        },
        kept: String::new(),
        format,
    })
}

fn pow10(n: i32) -> Option<i128> {
    10i128.checked_pow(u32::try_from(n).ok()?)
}

struct Parts<'a> {
    positive: bool,
    /// The number with its sign, without the suffix.
    value: &'a str,
    /// The integer digits without leading zeros ("0" if none).
    num: &'a str,
    denom: &'a str,
    suffix: &'a str,
}

/// apimachinery's `parseQuantityString`.
fn split(s: &str) -> Option<Parts<'_>> {
    let b = s.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut positive = true;
    match b.first() {
        Some(b'-') => {
            positive = false;
            pos = 1;
        }
        Some(b'+') => pos = 1,
        _ => {}
    }
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    let parts = |value, num, denom, suffix| {
        Some(Parts {
            positive,
            value,
            num,
            denom,
            suffix,
        })
    };
    if pos >= end {
        return parts("0", "0", "", "");
    }
    let start = pos;
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos >= end {
        return parts(s, &s[start..], "", "");
    }
    let num = if pos == start { "0" } else { &s[start..pos] };
    let mut denom = "";
    if b[pos] == b'.' {
        pos += 1;
        let from = pos;
        while pos < end && b[pos].is_ascii_digit() {
            pos += 1;
        }
        denom = &s[from..pos];
        if pos >= end {
            return parts(s, num, denom, "");
        }
    }
    let value = &s[..pos];
    let suffix_start = pos;
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    (pos >= end).then_some(())?;
    parts(value, num, denom, &s[suffix_start..])
}

/// The suffix's base, power and format.
fn interpret(suffix: &str) -> Option<(i32, i32, Format)> {
    let decimal = |e| Some((10, e, Format::DecimalSI));
    let binary = |e| Some((2, e, Format::BinarySI));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        s if s.len() > 1 && (s.starts_with('e') || s.starts_with('E')) => {
            let e: i64 = s[1..].parse().ok()?;
            Some((10, e as i32, Format::DecimalExponent))
        }
        _ => None,
    }
}

/// The canonical string of a quantity (apimachinery's `CanonicalizeBytes` and suffix):
/// decimal values in powers of 1000, binary ones in powers of 1024 where they are whole.
pub fn canonical(q: &Quantity) -> Option<String> {
    let (mut unscaled, mut exponent) = match q.amount {
        Amount::Int { value, scale } => (i128::from(value), scale),
        Amount::Dec { unscaled, scale } => (unscaled, -scale),
    };
    if unscaled == 0 {
        return Some("0".into());
    }
    let mut format = q.format;
    if format == Format::BinarySI {
        let whole = if exponent >= 0 {
            unscaled.checked_mul(pow10(exponent)?)
        } else {
            // Rounded up to a whole number; not whole: written as a decimal.
            let d = pow10(-exponent);
            d.filter(|d| unscaled % d == 0).map(|d| unscaled / d)
        };
        match whole {
            Some(n) if n.abs() >= 1024 => {
                let mut times = 0;
                let mut n = n;
                while n.abs() >= 1024 && n % 1024 == 0 {
                    n /= 1024;
                    times += 1;
                }
                let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
                    .get(times)
                    .copied()
                    .unwrap_or("");
                return Some(format!("{n}{suffix}"));
            }
            _ => format = Format::DecimalSI,
        }
    }
    while unscaled % 10 == 0 {
        unscaled /= 10;
        exponent += 1;
    }
    while exponent % 3 != 0 {
        unscaled = unscaled.checked_mul(10)?;
        exponent -= 1;
    }
    let suffix = match format {
        Format::DecimalExponent if exponent == 0 => String::new(),
        Format::DecimalExponent => format!("e{exponent}"),
        _ => match exponent {
            -9 => "n",
            -6 => "u",
            -3 => "m",
            3 => "k",
            6 => "M",
            9 => "G",
            12 => "T",
            15 => "P",
            18 => "E",
            _ => "",
        }
        .to_string(),
    };
    Some(format!("{unscaled}{suffix}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int(value: i64, scale: i32) -> Amount {
        Amount::Int { value, scale }
    }

    #[test]
    fn canonical_input_is_kept_and_the_rest_is_canonicalised_first() {
        let q = as_controller_sees("100m").unwrap();
        assert_eq!((q.amount, q.kept.as_str()), (int(100, -3), "100m"));
        // 0.1 is stored as 100m, which the controller parses (and keeps).
        let q = as_controller_sees("0.1").unwrap();
        assert_eq!((q.amount, q.kept.as_str()), (int(100, -3), "100m"));
        // A multiple of 8 in a binary unit is not kept, though canonical.
        let q = as_controller_sees("512Mi").unwrap();
        assert_eq!(q.amount, int(536_870_912, 0));
        assert_eq!((q.kept.as_str(), q.format), ("", Format::BinarySI));
        let q = as_controller_sees("1Gi").unwrap();
        assert_eq!(q.kept, "1Gi");
        // 1024Mi is stored as 1Gi.
        assert_eq!(as_controller_sees("1024Mi").unwrap().kept, "1Gi");
        assert_eq!(as_controller_sees("1000m").unwrap().kept, "1");
        assert_eq!(as_controller_sees("1500").unwrap().kept, "1500");
        assert_eq!(as_controller_sees("1.5G").unwrap().kept, "1500M");
        assert_eq!(as_controller_sees("1e3").unwrap().kept, "1e3");
        assert_eq!(as_controller_sees("0").unwrap().kept, "0");
    }

    #[test]
    fn large_and_fine_values_are_decimals_rounded_up_to_nano() {
        let q = parse("1Pi").unwrap();
        assert_eq!(
            q.amount,
            Amount::Dec {
                unscaled: (1i128 << 50) * 1_000_000_000,
                scale: 9
            }
        );
        assert_eq!(canonical(&q).as_deref(), Some("1Pi"));
        let q = parse("0.1n").unwrap();
        assert_eq!(
            q.amount,
            Amount::Dec {
                unscaled: 1,
                scale: 9
            }
        );
        assert_eq!(canonical(&q).as_deref(), Some("1n"));
        // A fraction of a binary unit below one is written as a decimal.
        let q = parse("0.5Ki").unwrap();
        assert_eq!(canonical(&q).as_deref(), Some("512"));
    }

    #[test]
    fn malformed_quantities_are_refused() {
        for bad in ["", "abc", "1x", "1.2.3", "--1", "1Ki2"] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}

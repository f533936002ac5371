//! Typed values: decimals, initial values from template text, and their printed forms.

use crate::types::FieldType;

/// A FAST decimal: `mantissa * 10^exponent`, exactly as sent (not normalized).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(C)]
pub struct Decimal {
    pub exponent: i32,
    pub mantissa: i64,
}

impl Decimal {
    pub fn new(mantissa: i64, exponent: i32) -> Decimal {
        Decimal { exponent, mantissa }
    }

    /// Parse the plain decimal notation of a template's initial value and normalize it
    /// (mantissa without trailing zeros), as the specification asks. `"1.0"` is 1e0,
    /// `"-5025.5"` is -50255e-1, `"100"` is 1e2, `"2.5e3"` is 25e2.
    pub fn parse(s: &str) -> Result<Decimal, ValueError> {
        let s = s.trim();
        let (num, exp_part) = match s.find(['e', 'E']) {
            Some(i) => (&s[..i], Some(&s[i + 1..])),
            None => (s, None),
        };
        let mut exponent: i64 = match exp_part {
            Some(e) => e.parse::<i64>().map_err(|_| ValueError::new(s, "a bad exponent"))?,
            None => 0,
        };
        let (neg, digits) = match num.strip_prefix('-') {
            Some(r) => (true, r),
            None => (false, num.strip_prefix('+').unwrap_or(num)),
        };
        let (int, frac) = match digits.find('.') {
            Some(i) => (&digits[..i], &digits[i + 1..]),
            None => (digits, ""),
        };
        if int.is_empty() && frac.is_empty() {
            return Err(ValueError::new(s, "not a decimal"));
        }
        if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
            return Err(ValueError::new(s, "not a decimal"));
        }
        let mut m: i128 = 0;
        for b in int.bytes().chain(frac.bytes()) {
            m = m * 10 + i128::from(b - b'0');
            if m > i128::from(i64::MAX) + 1 {
                return Err(ValueError::new(s, "a mantissa that does not fit 64 bits"));
            }
        }
        exponent -= frac.len() as i64;
        if m == 0 {
            exponent = 0;
        }
        while m != 0 && m % 10 == 0 {
            m /= 10;
            exponent += 1;
        }
        let m = if neg { -m } else { m };
        let mantissa = i64::try_from(m).map_err(|_| ValueError::new(s, "a mantissa that does not fit 64 bits"))?;
        if !(-63..=63).contains(&exponent) {
            return Err(ValueError::new(s, "an exponent outside -63..=63"));
        }
        Ok(Decimal { exponent: exponent as i32, mantissa })
    }

    /// Write the value in plain decimal notation with the digits the exponent gives:
    /// `-50250e-1` is `-5025.0`, `5e2` is `500`, `7e0` is `7`.
    pub fn write_plain(&self, out: &mut String) {
        use std::fmt::Write;
        let neg = self.mantissa < 0;
        let digits = self.mantissa.unsigned_abs().to_string();
        if neg {
            out.push('-');
        }
        if self.exponent >= 0 {
            out.push_str(&digits);
            if self.mantissa != 0 {
                for _ in 0..self.exponent {
                    out.push('0');
                }
            }
            return;
        }
        let frac = (-self.exponent) as usize;
        if digits.len() > frac {
            let (i, f) = digits.split_at(digits.len() - frac);
            let _ = write!(out, "{i}.{f}");
        } else {
            out.push_str("0.");
            for _ in 0..frac - digits.len() {
                out.push('0');
            }
            out.push_str(&digits);
        }
    }
}

impl std::fmt::Display for Decimal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut s = String::new();
        self.write_plain(&mut s);
        f.write_str(&s)
    }
}

/// An initial value, converted to its field's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Initial {
    Int(i64),
    Decimal(Decimal),
    Bytes(Vec<u8>),
}

/// Convert a template's `value` attribute to the field's type (error S3 when it does not).
/// A value that does not read as its type: the text and what it is instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueError {
    pub text: String,
    /// What the text is (`not a uInt32`, `not a decimal`, ...).
    pub reason: &'static str,
}

impl ValueError {
    fn new(text: &str, reason: &'static str) -> Self {
        ValueError { text: text.to_string(), reason }
    }
}

impl std::fmt::Display for ValueError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} is {}", self.text, self.reason)
    }
}

impl std::error::Error for ValueError {}

pub fn parse_initial(ty: FieldType, s: &str) -> Result<Initial, ValueError> {
    let t = s.trim();
    match ty {
        FieldType::UInt32 => {
            t.parse::<u32>().map(|v| Initial::Int(i64::from(v))).map_err(|_| ValueError::new(t, "not a uInt32"))
        }
        FieldType::Int32 => {
            t.parse::<i32>().map(|v| Initial::Int(i64::from(v))).map_err(|_| ValueError::new(t, "not an int32"))
        }
        FieldType::UInt64 => {
            t.parse::<u64>().map(|v| Initial::Int(v as i64)).map_err(|_| ValueError::new(t, "not a uInt64"))
        }
        FieldType::Int64 => t.parse::<i64>().map(Initial::Int).map_err(|_| ValueError::new(t, "not an int64")),
        FieldType::Decimal => Decimal::parse(t).map(Initial::Decimal),
        FieldType::Ascii => {
            if s.is_ascii() {
                Ok(Initial::Bytes(s.as_bytes().to_vec()))
            } else {
                Err(ValueError::new(s, "not ASCII"))
            }
        }
        FieldType::Unicode => Ok(Initial::Bytes(s.as_bytes().to_vec())),
        FieldType::Bytes => {
            let hex: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
            if !hex.len().is_multiple_of(2) || !hex.iter().all(u8::is_ascii_hexdigit) {
                return Err(ValueError::new(s, "not an even number of hex digits"));
            }
            let nib = |c: u8| (c as char).to_digit(16).unwrap_or(0) as u8;
            Ok(Initial::Bytes(hex.chunks(2).map(|p| nib(p[0]) << 4 | nib(p[1])).collect()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_parse_normalizes() {
        assert_eq!(Decimal::parse("1.0").unwrap(), Decimal::new(1, 0));
        assert_eq!(Decimal::parse("100").unwrap(), Decimal::new(1, 2));
        assert_eq!(Decimal::parse("-5025.5").unwrap(), Decimal::new(-50255, -1));
        assert_eq!(Decimal::parse("0.00").unwrap(), Decimal::new(0, 0));
        assert_eq!(Decimal::parse("2.5e3").unwrap(), Decimal::new(25, 2));
        assert!(Decimal::parse("1.2.3").is_err());
        assert!(Decimal::parse("").is_err());
        assert!(Decimal::parse("1e99").is_err());
    }

    #[test]
    fn decimal_plain() {
        assert_eq!(Decimal::new(-50250, -1).to_string(), "-5025.0");
        assert_eq!(Decimal::new(5, 2).to_string(), "500");
        assert_eq!(Decimal::new(7, 0).to_string(), "7");
        assert_eq!(Decimal::new(5, -3).to_string(), "0.005");
        assert_eq!(Decimal::new(-94325, -3).to_string(), "-94.325");
        assert_eq!(Decimal::new(0, 3).to_string(), "0");
    }

    #[test]
    fn initial_values() {
        assert_eq!(parse_initial(FieldType::Bytes, "0a FF").unwrap(), Initial::Bytes(vec![10, 255]));
        assert!(parse_initial(FieldType::Bytes, "0").is_err());
        assert!(parse_initial(FieldType::UInt32, "-1").is_err());
        assert_eq!(parse_initial(FieldType::Int32, "-1").unwrap(), Initial::Int(-1));
    }
}

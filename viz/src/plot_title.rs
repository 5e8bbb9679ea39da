//! Plot titles: what, program, rank count and date.

use wmhcct_format::Profile;

use crate::h5layout::rank_count;

/// `YYYY-MM-DD HH:MM UTC` of a Unix time in ns.
pub fn utc_date(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02} UTC",
        rem / 3600,
        (rem % 3600) / 60
    )
}

/// The program's file name.
pub fn program_name(p: &Profile) -> String {
    let name = p.meta.program.rsplit('/').next().unwrap_or("");
    if name.is_empty() {
        "(unknown program)".into()
    } else {
        name.to_string()
    }
}

/// `what — program, N ranks, date`.
pub fn title(p: &Profile, what: &str) -> String {
    let n = rank_count(p);
    format!(
        "{what} — {}, {n} rank{}, {}",
        program_name(p),
        if n == 1 { "" } else { "s" },
        utc_date(p.meta.start_unix_ns)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(utc_date(0), "1970-01-01 00:00 UTC");
        // 2024-02-29 12:34:56 UTC
        assert_eq!(
            utc_date(1_709_210_096 * 1_000_000_000),
            "2024-02-29 12:34 UTC"
        );
    }

    #[test]
    fn titles() {
        let mut p = Profile::default();
        p.meta.program = "/usr/bin/app".into();
        assert!(title(&p, "Memory").starts_with("Memory — app, 1 rank, 1970"));
    }
}

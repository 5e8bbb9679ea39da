//! Runs of repeated frames: a recursion shown once with its length.

/// `items` with each run of consecutive items that `same` says are equal
/// given once, with the run's length, in order.
pub fn runs_by<T>(items: &[T], same: impl Fn(&T, &T) -> bool) -> Vec<(&T, usize)> {
    let mut out: Vec<(&T, usize)> = Vec::new();
    for x in items {
        match out.last_mut() {
            Some((y, n)) if same(y, x) => *n += 1,
            _ => out.push((x, 1)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::runs_by;

    #[test]
    fn consecutive_equal_items_become_one_run() {
        let v = [1, 2, 2, 2, 3, 2, 2];
        let got: Vec<(i32, usize)> = runs_by(&v, |a, b| a == b)
            .into_iter()
            .map(|(x, n)| (*x, n))
            .collect();
        assert_eq!(got, [(1, 1), (2, 3), (3, 1), (2, 2)]);
        assert_eq!(runs_by(&v, |_, _| false).len(), v.len());
        assert_eq!(runs_by(&v, |_, _| true), [(&1, 7)]);
        assert!(runs_by(&[] as &[i32], |a, b| a == b).is_empty());
    }
}

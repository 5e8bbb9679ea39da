//! This process's rank as the MPI launcher tells it, through the
//! environment, before MPI is initialised: for lines that say the same on
//! every rank of a job, which only rank 0 prints.

/// The rank variables of Open MPI's `mpirun`, PMI (MPICH's Hydra, Intel
/// MPI), PMIx, and Slurm's `srun`, in that order.
const RANK_VARS: [&str; 4] = [
    "OMPI_COMM_WORLD_RANK",
    "PMI_RANK",
    "PMIX_RANK",
    "SLURM_PROCID",
];

/// The rank the first set variable of [`RANK_VARS`] gives (`get` reads the
/// environment).
pub fn world_rank(get: impl Fn(&str) -> Option<String>) -> Option<u32> {
    RANK_VARS
        .iter()
        .find_map(|var| get(var))
        .and_then(|v| v.trim().parse().ok())
}

/// Whether a job-wide line is this process's to print: rank 0's, or any
/// process's when no launcher said which rank it is.
pub fn speaks_for_the_job() -> bool {
    world_rank(|v| std::env::var(v).ok()).is_none_or(|r| r == 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn each_launcher() {
        assert_eq!(world_rank(env(&[("OMPI_COMM_WORLD_RANK", "3")])), Some(3));
        assert_eq!(world_rank(env(&[("PMI_RANK", "0")])), Some(0));
        assert_eq!(world_rank(env(&[("PMIX_RANK", " 7 ")])), Some(7));
        assert_eq!(world_rank(env(&[("SLURM_PROCID", "12")])), Some(12));
        assert_eq!(world_rank(env(&[])), None);
    }

    #[test]
    fn the_launchers_own_variable_wins_over_slurms() {
        // mpirun inside an allocation: SLURM_PROCID is the batch step's.
        let both = [("SLURM_PROCID", "0"), ("OMPI_COMM_WORLD_RANK", "2")];
        assert_eq!(world_rank(env(&both)), Some(2));
        assert_eq!(world_rank(env(&[("PMI_RANK", "x")])), None);
    }
}

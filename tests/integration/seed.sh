# Sourced by the integration scripts: the run's seed, fresh each run unless
# DS4_TEST_SEED names one, printed first; bash's RANDOM is seeded with it, so
# every later $RANDOM draw (budgets, chunk sizes, choices) repeats on a rerun
# with DS4_TEST_SEED=<seed>.
seed=${DS4_TEST_SEED:-$RANDOM}
RANDOM=$seed
echo "seed $seed (rerun with DS4_TEST_SEED=$seed)"

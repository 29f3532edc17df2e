# Sourced by the script tests that start MPI jobs (through LAUNCHER, or with
# mpirun or srun of their own): under the torchrun LAUNCHER
# (tests/torchrun-launch.sh: make check without MPI) there is no MPI launcher
# to give them, so they skip, saying why; make check under MPI runs them.
case ${LAUNCHER:-} in
  *torchrun-launch.sh*)
    echo "SKIP: $(basename "$0") is for MPI runs (mpirun, srun, an MPI LAUNCHER); LAUNCHER is torchrun (tests/torchrun-launch.sh), a run without MPI"
    exit 77 ;;
esac

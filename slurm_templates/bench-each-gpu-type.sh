#!/bin/bash
# Submit bench.sbatch once per GPU type named in the site file (GPU_PYTHON_GPU_TYPES), each job asking
# for one GPU of its type. Run on a login node, from the repository's top folder; prints the job ids.
#   source slurm_templates/site.sh && bash slurm_templates/bench-each-gpu-type.sh
# A GPU type cannot be a variable in an #SBATCH line, so it goes on sbatch's command line, which beats
# the template's own `#SBATCH --gpus=1`.
set -euo pipefail
# shellcheck source=slurm_templates/site.sh
source "${GPU_PYTHON_SITE:-slurm_templates/site.sh}"

if [ -z "$GPU_PYTHON_GPU_TYPES" ]; then
    echo "GPU_PYTHON_GPU_TYPES is empty in the site file: list the types that \`sinfo -o \"%P %G\"\` shows" >&2
    exit 1
fi
for gpu_type in $GPU_PYTHON_GPU_TYPES; do
    sbatch --parsable --gpus="$gpu_type:1" --job-name="bench-$gpu_type" \
        --export="ALL,GPU_PYTHON_GPU_TYPE=$gpu_type" "$@" slurm_templates/bench.sbatch
done

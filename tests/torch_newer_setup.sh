#!/bin/sh
# Install torch 2.2 from PyPI into a virtual environment (default
# /opt/torch22) for tests/torch_newer.sh. PyPI's torch wheels are CUDA
# builds; their CUDA libraries come as nvidia-* wheels and are only loaded,
# not used, on a machine without a GPU. About 2.7 GB to download.
set -eu
dir=${1:-/opt/torch22}
python3 -m venv "$dir"
"$dir/bin/pip" install --quiet "torch==2.2.2"
"$dir/bin/python" -c "import torch; print('torch', torch.__version__, 'in', '$dir')"

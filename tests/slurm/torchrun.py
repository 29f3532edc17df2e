#!/usr/bin/python3
"""torchrun for the tests: the same elastic agent and arguments as torchrun.

Debian 12's torchrun CLI fails before starting anything on Python 3.11
(Std.from_str returns None for "-r 0", so to_map() raises AttributeError);
this drives torch.distributed.run's own parser and launcher with redirects
and tee set to Std.NONE. Usage as torchrun:
    torchrun.py --standalone --nproc_per_node=2 --no_python PROGRAM
"""
import sys

from torch.distributed.elastic.multiprocessing import Std
from torch.distributed.launcher.api import elastic_launch
from torch.distributed.run import config_from_args, get_args_parser

args = get_args_parser().parse_args(sys.argv[1:])
args.redirects = args.tee = "0"
config, cmd, cmd_args = config_from_args(args)
config.redirects = config.tee = Std.NONE
elastic_launch(config=config, entrypoint=cmd)(*cmd_args)

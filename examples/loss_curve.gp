# Loss curves of the surrogate training (ns2d_train's loss.csv):
#   gnuplot -e "in='DIR/loss.csv'; out='DIR/loss.png'" examples/loss_curve.gp
# loss.csv: header "step,epoch,lr,train_loss,val_loss", then one row per logged
# step; val_loss is "nan" or empty on rows without validation.
if (!exists("in")) in = 'loss.csv'
if (!exists("out")) out = 'loss.png'

set datafile separator ','
# Empty fields and NaN ("nan", "-nan") are missing data: the point is
# skipped and the validation line still joins the rows that have one.
set datafile missing NaN
# No logged row yet (stats then defines nothing): fail before `set output`
# would leave an empty PNG behind.
stats in using 'train_loss' nooutput
if (!exists("STATS_records")) exit error sprintf("%s: no train_loss rows to plot", in)

set terminal pngcairo size 900,600 enhanced font 'sans,11'
set output out
set key top right box opaque
set title 'AFNO surrogate training: mean squared error'
set xlabel 'step'
set ylabel 'MSE (log scale)'
set logscale y
set format y '10^{%L}'
set grid xtics ytics mytics
set mytics 10

# Columns by name (4 = train_loss, 5 = val_loss after step, epoch, lr).
plot in using 'step':'train_loss' with lines lw 2 lc rgb '#1f5fa8' title 'train', \
     in using 'step':'val_loss' with linespoints lw 2 pt 7 ps 0.7 lc rgb '#c0392b' title 'validation'

"""The performance model: what a compiled step costs on a chip, predicted.

- chips: the one table of chip facts (peaks, memory, bandwidths, links, power), cited;
- hlo: the kernels a compiled program launches, read from its optimized HLO;
- price: the one pricing function, vectorised: kernels and rates at efficiency 1, and
  the fitted constants that price them;
- host: the host's side of a step in jaxcnn's loops (measured) and the loop step;
- predict: a typed Prediction of one step (device step, loop step, epoch, band);
- fit: the constants fitted to measured and published steps, and their error bands.

Importing this package imports none of them (chips and hlo need no JAX).
"""

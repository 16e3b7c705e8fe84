"""The machine the app is sized for: a Hugging Face Space's free CPU, 2 cores (the project's own machines too).

Each request runs one torch thread (``app.warm_up``): two threads of one forward pass wait on each other here, so
the work that may run side by side (generate calls outside a batch, ablation and patching chunks) runs ``CORES``
at a time, one a core."""

CORES = 2

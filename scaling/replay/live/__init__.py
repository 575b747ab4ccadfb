"""Trace replay in real time: real simulator processes, the real loop, real requests.

`manage.py replay TRACE --live` runs scaling.replay.live.replay.LiveReplay, whose module
docstring says what is real and what is scaled. One module per responsibility:

- options: what a run is asked to do (LiveOptions), and how it fails;
- pools: the warm pool variants (cold, warm, asleep) run side by side with --pools;
- clock: the policy's clock divided by the speed (TimeScale);
- load: the trace window, its rate scale and the arrival times;
- processes: the simulator processes (actuator) and the scraper that watches them;
- driver: sends the requests at their arrival times and times each one;
- replay: one controller over one window, from the database to the event loop;
- report: what a run measured (LiveResult), and report_text, how it is printed;
- prediction: the simulated-time replay of the same load, to set beside it;
- settings_override, private_redis: the process-wide settings and Redis a run uses.
"""

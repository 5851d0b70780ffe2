// Waiting-queue ordering policies (SGLang python/sglang/srt/managers/schedule_policy.py SchedulePolicy).

/** --schedule-policy values built: 'fcfs' (arrival order) and 'lpm' (longest cached prefix first). */
export type SchedulePolicy = 'fcfs' | 'lpm';

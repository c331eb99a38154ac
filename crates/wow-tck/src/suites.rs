//! The macros that stamp out one `#[tokio::test]` per case of each suite, exported at the
//! crate's root (`wow_tck::event_store_tck!`, ...).

/// Runs every EventStore case against stores from `$factory`, an async function or closure
/// with no arguments returning something that coerces to `Arc<dyn EventStore>`. With
/// `optional: $factory` the factory returns an `Option` of it, and a case whose factory gave
/// `None` (its service is not reachable and not required) returns at once.
#[macro_export]
macro_rules! event_store_tck {
    (optional: $factory:expr) => {
        $crate::__event_store_cases!(optional, $factory);
    };
    ($factory:expr) => {
        $crate::__event_store_cases!(required, $factory);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __event_store_cases {
    ($mode:ident, $factory:expr) => {
        $crate::__tck_cases!(
            $mode,
            event_store,
            $factory,
            [
                appends_and_loads_streams_in_version_order,
                rejects_duplicate_request_id,
                rejects_event_version_conflict,
                rejects_duplicate_aggregate_id,
                reports_replayed_request_as_duplicate_request_id,
                accepts_same_request_id_on_two_aggregates,
                rejects_illegal_streams,
                finds_request_by_aggregate_and_request_id,
                loads_by_version_range_and_time_range,
                rejects_bad_ranges,
                returns_last_stream,
                scans_aggregate_ids,
                appends_in_parallel_to_distinct_aggregates,
                version_race_has_exactly_one_winner,
                duplicate_storm_stores_one_stream_per_request_id,
                preserves_every_stream_field,
                records_a_rejection_and_finds_it,
                a_rejection_blocks_a_later_append_of_its_request_id,
                an_append_blocks_a_later_rejection_of_its_request_id,
                a_second_rejection_of_a_request_id_is_a_duplicate,
                rejections_are_per_aggregate,
                decisions_are_seen_only_by_their_tenant,
                tenants_are_namespaces,
                rejects_a_rejection_with_an_empty_request_id,
                rejection_and_append_race_has_exactly_one_decision,
                an_expected_version_conflict_records_nothing,
                a_lost_race_on_the_append_records_nothing,
                a_stale_pin_of_an_appended_intent_is_its_duplicate,
                a_redelivered_message_is_its_own_success,
                the_feed_of_an_empty_store_is_empty,
                the_feed_lists_appended_streams_in_append_order,
                the_feed_resumes_after_a_position,
                the_feed_pages_by_limit,
                rejections_are_not_in_the_feed,
                a_feed_reader_racing_appenders_skips_nothing,
                queries_streams_as_documents,
                a_claim_is_written_with_its_stream,
                a_key_another_aggregate_holds_refuses_the_whole_append,
                a_release_frees_a_key_and_a_move_takes_the_new_one,
                claiming_a_key_held_and_releasing_one_not_held_change_nothing,
                keys_are_per_tenant_and_per_space,
                an_operator_release_frees_a_key_whoever_holds_it,
                a_release_racing_claims_frees_the_key_once,
                a_refused_append_changes_no_key,
                concurrent_claims_of_one_value_have_exactly_one_winner,
                a_second_claimant_is_refused_and_its_resend_replays_the_refusal,
                claims_through_two_processes_have_exactly_one_winner,
                a_reservation_holds_its_key_until_its_time,
                a_lapsed_reservation_frees_its_key_and_a_late_confirmation_is_refused,
                a_confirmed_reservation_holds_its_key_for_good,
                claim_keys_takes_free_keys_and_reports_held_ones,
                a_sign_up_confirmed_late_loses_its_name_to_a_later_one,
                claims_of_a_lapsed_reservation_have_exactly_one_winner,
                an_append_whose_conditions_hold_is_written,
                a_moved_aggregate_refuses_the_append_and_nothing_is_written,
                a_condition_on_a_missing_aggregate_fails_once_it_exists,
                an_appends_own_conflicts_come_before_its_conditions,
                conditions_are_per_tenant_and_name_other_aggregates,
                a_conditional_append_is_never_ordered_after_a_move_of_what_it_read,
                stays_through_two_processes_never_follow_the_close_of_their_room,
            ]
        );
    };
}

/// Runs every SnapshotStore case against stores from `$factory`, an async function or
/// closure with no arguments returning something that coerces to `Arc<dyn SnapshotStore>`
/// (or, with `optional:`, an `Option` of it).
#[macro_export]
macro_rules! snapshot_store_tck {
    (optional: $factory:expr) => {
        $crate::__snapshot_store_cases!(optional, $factory);
    };
    ($factory:expr) => {
        $crate::__snapshot_store_cases!(required, $factory);
    };
}

/// Runs every lifecycle case (SPEC DM-6: delete and recover keep keys and deadlines whole)
/// against stores from `$factory`, an async function or closure with no arguments returning
/// a [`crate::lifecycle::Store`] (or, with `optional:`, an `Option` of it).
#[macro_export]
macro_rules! lifecycle_tck {
    (optional: $factory:expr) => {
        $crate::__lifecycle_cases!(optional, $factory);
    };
    ($factory:expr) => {
        $crate::__lifecycle_cases!(required, $factory);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __lifecycle_cases {
    ($mode:ident, $factory:expr) => {
        $crate::__tck_cases!(
            $mode,
            lifecycle,
            $factory,
            [
                a_delete_releases_the_keys_and_a_recover_claims_them_again,
                a_recover_whose_key_another_aggregate_took_is_refused_and_recorded,
                a_delete_suspends_the_deadlines_and_a_recover_restores_them,
                a_deadline_that_passed_while_deleted_fires_after_the_recover,
                a_recover_restores_only_what_the_state_holds,
                a_firing_a_later_event_overtook_is_refused_and_recorded,
                a_command_after_an_overdue_deadline_is_decided_after_it,
            ]
        );
    };
}

/// Runs every deadline case against stores from `$factory`, each keeping history and
/// deadlines (see [`crate::deadline::Store`]); `optional:` as for the other suites.
#[macro_export]
macro_rules! deadline_store_tck {
    (optional: $factory:expr) => {
        $crate::__deadline_store_cases!(optional, $factory);
    };
    ($factory:expr) => {
        $crate::__deadline_store_cases!(required, $factory);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __deadline_store_cases {
    ($mode:ident, $factory:expr) => {
        $crate::__tck_cases!(
            $mode,
            deadline,
            $factory,
            [
                a_schedule_is_written_with_its_stream,
                a_refused_append_schedules_nothing,
                a_later_stream_moves_and_cancels_a_deadline,
                due_rows_come_earliest_first_within_the_limit,
                fired_deletes_only_the_schedule_that_fired,
                deadlines_are_per_tenant,
                a_schedule_on_its_own_is_idempotent,
                a_sagas_deadline_keeps_the_owner_it_is_held_to,
                a_malformed_deadline_refuses_the_whole_append,
                one_tenants_backlog_never_delays_another_tenants_rows,
                a_scheduler_reads_only_its_own_partitions_rows,
                the_next_firing_time_is_the_earliest_waiting_row_of_the_partitions_asked,
                a_failed_firing_waits_without_holding_up_later_rows,
                a_held_row_waits_for_a_re_fire,
                scheduling_again_starts_the_attempts_again,
                cancel_named_takes_every_row_of_the_name_in_one_tenant,
                the_store_clock_judges_what_is_due,
            ]
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __snapshot_store_cases {
    ($mode:ident, $factory:expr) => {
        $crate::__tck_cases!(
            $mode,
            snapshot_store,
            $factory,
            [
                saves_and_loads_snapshot,
                keeps_the_state_version,
                keeps_the_highest_version,
                concurrent_saves_keep_the_highest_version,
                snapshots_are_per_tenant,
            ]
        );
    };
}

/// Runs every processed-message case against ledgers from `$factory` (see
/// [`crate::processed_message::Ledger`]); `optional:` as for the other suites.
#[macro_export]
macro_rules! processed_message_tck {
    (optional: $factory:expr) => {
        $crate::__processed_message_cases!(optional, $factory);
    };
    ($factory:expr) => {
        $crate::__processed_message_cases!(required, $factory);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __processed_message_cases {
    ($mode:ident, $factory:expr) => {
        $crate::__tck_cases!(
            $mode,
            processed_message,
            $factory,
            [
                applies_a_message_once,
                a_failed_work_leaves_nothing_and_runs_again,
                consumers_keep_their_own_records,
                concurrent_deliveries_apply_once,
                random_redeliveries_end_equal_to_a_fold,
            ]
        );
    };
}

/// Runs every downstream case (positions, effect journal, compensation records) against
/// [`crate::downstream::Stores`] from `$factory`; `optional:` as for the other suites.
#[macro_export]
macro_rules! downstream_tck {
    (optional: $factory:expr) => {
        $crate::__downstream_cases!(optional, $factory);
    };
    ($factory:expr) => {
        $crate::__downstream_cases!(required, $factory);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __downstream_cases {
    ($mode:ident, $factory:expr) => {
        $crate::__tck_cases!(
            $mode,
            downstream,
            $factory,
            [
                positions_move_only_to_the_next_version,
                position_runs_move_as_their_versions_would,
                a_retry_that_fills_a_gap_moves_the_position_over_the_runs_past_it,
                runs_written_out_of_order_reach_the_highest_version_without_a_gap,
                runs_past_a_gap_survive_a_restart,
                a_consumer_failing_once_ends_at_the_head_and_a_restart_replays_nothing,
                positions_written_late_by_a_processor_that_lost_the_partition_are_not_lost,
                feed_cursors_are_per_reader_and_never_move_back,
                positions_are_per_tenant,
                reset_forgets_one_consumer,
                an_effect_is_started_then_done_once,
                records_failures_and_counts_attempts,
                exhausts_after_max_attempts,
                due_records_come_in_version_order,
                lists_by_status_and_consumer_in_pages,
                filters_by_aggregate_and_counts_the_matches,
                an_operators_retry_spec_is_the_records_own,
                an_unrecoverable_record_is_never_due,
                concurrent_failures_make_one_record,
            ]
        );
    };
}

/// Runs every parked-streams case (SPEC DS-5) against the stores from `$factory`, the same
/// factory as [`downstream_tck!`] (or, with `optional:`, an `Option` of them).
#[macro_export]
macro_rules! parking_tck {
    (optional: $factory:expr) => {
        $crate::__parking_cases!(optional, $factory);
    };
    ($factory:expr) => {
        $crate::__parking_cases!(required, $factory);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __parking_cases {
    ($mode:ident, $factory:expr) => {
        $crate::__tck_cases!(
            $mode,
            parking,
            $factory,
            [
                a_lane_parks_behind_its_head_and_closes_only_past_what_was_parked,
                lanes_are_per_consumer_tenant_and_aggregate,
                a_skipped_failure_names_its_operator_and_is_never_due,
                parked_streams_wait_across_a_restart_and_run_in_order_after_the_retry,
                a_failure_in_catch_up_parks_the_rest_and_the_retry_runs_them_before_the_next_live_stream,
                a_stream_past_a_gap_is_preceded_by_the_missing_ones_from_history,
            ]
        );
    };
}

/// Runs every view-generations case (SPEC DS-6's rebuild) against
/// [`crate::generations::Stores`] from `$factory` (or, with `optional:`, an `Option` of
/// them).
#[macro_export]
macro_rules! generations_tck {
    (optional: $factory:expr) => {
        $crate::__generations_cases!(optional, $factory);
    };
    ($factory:expr) => {
        $crate::__generations_cases!(required, $factory);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __generations_cases {
    ($mode:ident, $factory:expr) => {
        $crate::__tck_cases!(
            $mode,
            generations,
            $factory,
            [
                a_rebuild_swaps_to_a_whole_generation_and_readers_never_see_less,
                a_changed_definition_is_rebuilt_and_a_stopped_rebuild_resumes,
                a_failing_rebuild_leaves_readers_on_the_old_generation,
                two_rebuilds_at_once_swap_once,
            ]
        );
    };
}

/// Runs every ViewStore case against stores from `$factory`, an async function or closure
/// with no arguments returning something that coerces to `Arc<dyn ViewStore>` (or, with
/// `optional:`, an `Option` of it).
#[macro_export]
macro_rules! view_store_tck {
    (optional: $factory:expr) => {
        $crate::__view_store_cases!(optional, $factory);
    };
    ($factory:expr) => {
        $crate::__view_store_cases!(required, $factory);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __view_store_cases {
    ($mode:ident, $factory:expr) => {
        $crate::__tck_cases!(
            $mode,
            view_store,
            $factory,
            [
                updates_and_loads_a_row,
                applies_a_message_once,
                concurrent_updates_of_one_key_apply_once_each,
                a_failed_update_writes_nothing,
                tenants_have_their_own_rows,
                lists_by_filter_in_id_order_and_pages,
                lists_through_field_indexes_as_without_them,
                scans_every_tenant_in_key_order_and_pages,
                clear_drops_one_views_rows_and_records,
                puts_only_newer_rows,
                query_logic_and_shorthands,
                query_comparisons,
                query_text_arrays_and_presence,
                query_long_and_mixed_lists,
                query_dates,
                query_sorts_and_pages,
            ]
        );
    };
}

/// Runs every rename case against stores from `$factory`, an async function or closure with
/// no arguments returning a [`crate::rename::Store`] (or, with `optional:`, an `Option` of it).
#[macro_export]
macro_rules! rename_tck {
    (optional: $factory:expr) => {
        $crate::__rename_cases!(optional, $factory);
    };
    ($factory:expr) => {
        $crate::__rename_cases!(required, $factory);
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __rename_cases {
    ($mode:ident, $factory:expr) => {
        $crate::__tck_cases!(
            $mode,
            rename,
            $factory,
            [
                renames_every_row_of_an_aggregate,
                a_rename_is_done_once,
                a_dry_run_changes_nothing,
                refuses_when_both_names_hold_an_aggregate,
                the_keys_an_aggregate_holds_follow_its_rename,
            ]
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __tck_cases {
    (required, $suite:ident, $factory:expr, [$($case:ident),* $(,)?]) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                let store: $crate::$suite::Store = ($factory)().await;
                $crate::$suite::$case(store).await;
            }
        )*
    };
    (optional, $suite:ident, $factory:expr, [$($case:ident),* $(,)?]) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn $case() {
                // The factory says why it has no store (and fails instead when the store is
                // required); the case is then skipped, visibly.
                let Some(store) = ($factory)().await else { return };
                let store: $crate::$suite::Store = store;
                $crate::$suite::$case(store).await;
            }
        )*
    };
}

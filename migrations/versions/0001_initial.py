"""initial schema

Revision ID: 0001
Revises: 
Create Date: 2026-11-30 01:25:37.157647
"""
from alembic import op
import sqlalchemy as sa


revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('alerts',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('fingerprint', sa.String(length=64), nullable=False),
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('version', sa.String(length=100), nullable=False),
    sa.Column('detector', sa.String(length=50), nullable=False),
    sa.Column('feature', sa.String(length=200), nullable=False),
    sa.Column('severity', sa.String(length=20), nullable=False),
    sa.Column('state', sa.String(length=20), nullable=False),
    sa.Column('value', sa.Float(), nullable=True),
    sa.Column('threshold', sa.Float(), nullable=True),
    sa.Column('summary', sa.Text(), nullable=False),
    sa.Column('details', sa.JSON(), nullable=False),
    sa.Column('consecutive_breaches', sa.Integer(), nullable=False),
    sa.Column('consecutive_clean', sa.Integer(), nullable=False),
    sa.Column('last_window_start_ms', sa.BigInteger(), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('fired_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('resolved_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_notified_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_alerts')),
    sa.UniqueConstraint('fingerprint', name=op.f('uq_alerts_fingerprint'))
    )
    with op.batch_alter_table('alerts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_alerts_state'), ['state'], unique=False)

    op.create_table('alias_events',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('alias', sa.String(length=50), nullable=False),
    sa.Column('version', sa.String(length=100), nullable=False),
    sa.Column('previous_version', sa.String(length=100), nullable=True),
    sa.Column('action', sa.String(length=20), nullable=False),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_alias_events'))
    )
    with op.batch_alter_table('alias_events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_alias_events_model'), ['model'], unique=False)

    op.create_table('baselines',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('version', sa.String(length=100), nullable=False),
    sa.Column('rows', sa.BigInteger(), nullable=False),
    sa.Column('summary', sa.JSON(), nullable=False),
    sa.Column('source', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_baselines')),
    sa.UniqueConstraint('model', 'version', name=op.f('uq_baselines_model'))
    )
    op.create_table('consumer_offsets',
    sa.Column('group_id', sa.String(length=200), nullable=False),
    sa.Column('topic', sa.String(length=200), nullable=False),
    sa.Column('partition', sa.Integer(), nullable=False),
    sa.Column('next_offset', sa.BigInteger(), nullable=False),
    sa.Column('topic_id', sa.String(length=64), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('group_id', 'topic', 'partition', name=op.f('pk_consumer_offsets'))
    )
    op.create_table('dead_letters',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('topic', sa.String(length=200), nullable=False),
    sa.Column('partition', sa.Integer(), nullable=True),
    sa.Column('offset', sa.BigInteger(), nullable=True),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('field', sa.String(length=500), nullable=True),
    sa.Column('model', sa.String(length=200), nullable=True),
    sa.Column('raw', sa.LargeBinary(), nullable=True),
    sa.Column('raw_size', sa.BigInteger(), nullable=False),
    sa.Column('received_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_dead_letters'))
    )
    with op.batch_alter_table('dead_letters', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_dead_letters_received_at'), ['received_at'], unique=False)

    op.create_table('detector_results',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('version', sa.String(length=100), nullable=False),
    sa.Column('window_start_ms', sa.BigInteger(), nullable=False),
    sa.Column('window_end_ms', sa.BigInteger(), nullable=False),
    sa.Column('detector', sa.String(length=50), nullable=False),
    sa.Column('feature', sa.String(length=200), nullable=False),
    sa.Column('metric', sa.String(length=100), nullable=False),
    sa.Column('value', sa.Float(), nullable=True),
    sa.Column('threshold', sa.Float(), nullable=True),
    sa.Column('breached', sa.Boolean(), nullable=False),
    sa.Column('details', sa.JSON(), nullable=False),
    sa.Column('evaluated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_detector_results'))
    )
    with op.batch_alter_table('detector_results', schema=None) as batch_op:
        batch_op.create_index('ix_detector_results_window', ['model', 'version', 'window_start_ms'], unique=False)

    op.create_table('labels',
    sa.Column('request_id', sa.String(length=256), nullable=False),
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('label', sa.JSON(), nullable=False),
    sa.Column('ts_ms', sa.BigInteger(), nullable=False),
    sa.Column('joined', sa.Boolean(), nullable=False),
    sa.Column('received_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('request_id', name=op.f('pk_labels'))
    )
    with op.batch_alter_table('labels', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_labels_model'), ['model'], unique=False)

    op.create_table('model_aliases',
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('alias', sa.String(length=50), nullable=False),
    sa.Column('version', sa.String(length=100), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('model', 'alias', name=op.f('pk_model_aliases'))
    )
    op.create_table('model_versions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('version', sa.String(length=100), nullable=False),
    sa.Column('artifact_path', sa.Text(), nullable=True),
    sa.Column('artifact_sha256', sa.String(length=64), nullable=True),
    sa.Column('training_data_sha256', sa.String(length=64), nullable=True),
    sa.Column('metrics', sa.JSON(), nullable=False),
    sa.Column('feature_schema', sa.JSON(), nullable=False),
    sa.Column('transform', sa.JSON(), nullable=True),
    sa.Column('stage', sa.String(length=20), nullable=False),
    sa.Column('description', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_model_versions')),
    sa.UniqueConstraint('model', 'version', name=op.f('uq_model_versions_model'))
    )
    op.create_table('notifications',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('idempotency_key', sa.String(length=128), nullable=False),
    sa.Column('alert_fingerprint', sa.String(length=64), nullable=True),
    sa.Column('channel', sa.String(length=30), nullable=False),
    sa.Column('kind', sa.String(length=20), nullable=False),
    sa.Column('payload', sa.JSON(), nullable=False),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.Column('response_status', sa.Integer(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('sent_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_notifications')),
    sa.UniqueConstraint('idempotency_key', name=op.f('uq_notifications_idempotency_key'))
    )
    with op.batch_alter_table('notifications', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_notifications_alert_fingerprint'), ['alert_fingerprint'], unique=False)
        batch_op.create_index('ix_notifications_due', ['status', 'next_attempt_at'], unique=False)

    op.create_table('predictions',
    sa.Column('request_id', sa.String(length=256), nullable=False),
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('version', sa.String(length=100), nullable=False),
    sa.Column('ts_ms', sa.BigInteger(), nullable=False),
    sa.Column('window_start_ms', sa.BigInteger(), nullable=False),
    sa.Column('prediction', sa.JSON(), nullable=False),
    sa.Column('label', sa.JSON(), nullable=True),
    sa.Column('labelled_at_ms', sa.BigInteger(), nullable=True),
    sa.PrimaryKeyConstraint('request_id', name=op.f('pk_predictions'))
    )
    with op.batch_alter_table('predictions', schema=None) as batch_op:
        batch_op.create_index('ix_predictions_ts', ['ts_ms'], unique=False)

    op.create_table('retrain_requests',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('idempotency_key', sa.String(length=128), nullable=False),
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('version', sa.String(length=100), nullable=True),
    sa.Column('reason', sa.JSON(), nullable=False),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('new_version', sa.String(length=100), nullable=True),
    sa.Column('promoted', sa.Boolean(), nullable=False),
    sa.Column('response', sa.JSON(), nullable=True),
    sa.Column('requested_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('completed_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_retrain_requests')),
    sa.UniqueConstraint('idempotency_key', name=op.f('uq_retrain_requests_idempotency_key'))
    )
    with op.batch_alter_table('retrain_requests', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_retrain_requests_model'), ['model'], unique=False)

    op.create_table('silences',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('model', sa.String(length=200), nullable=True),
    sa.Column('detector', sa.String(length=50), nullable=True),
    sa.Column('feature', sa.String(length=200), nullable=True),
    sa.Column('comment', sa.Text(), nullable=False),
    sa.Column('created_by', sa.String(length=200), nullable=False),
    sa.Column('starts_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_silences'))
    )
    op.create_table('window_evaluations',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('version', sa.String(length=100), nullable=False),
    sa.Column('window_start_ms', sa.BigInteger(), nullable=False),
    sa.Column('window_end_ms', sa.BigInteger(), nullable=False),
    sa.Column('events', sa.BigInteger(), nullable=False),
    sa.Column('partitions', sa.Integer(), nullable=False),
    sa.Column('status', sa.String(length=30), nullable=False),
    sa.Column('summary', sa.JSON(), nullable=False),
    sa.Column('evaluated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_window_evaluations')),
    sa.UniqueConstraint('model', 'version', 'window_start_ms', name=op.f('uq_window_evaluations_model'))
    )
    op.create_table('window_states',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('model', sa.String(length=200), nullable=False),
    sa.Column('version', sa.String(length=100), nullable=False),
    sa.Column('window_start_ms', sa.BigInteger(), nullable=False),
    sa.Column('window_end_ms', sa.BigInteger(), nullable=False),
    sa.Column('partition', sa.Integer(), nullable=False),
    sa.Column('events', sa.BigInteger(), nullable=False),
    sa.Column('late_events', sa.BigInteger(), nullable=False),
    sa.Column('state', sa.LargeBinary(), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_window_states')),
    sa.UniqueConstraint('model', 'version', 'window_start_ms', 'partition', name=op.f('uq_window_states_model'))
    )
    with op.batch_alter_table('window_states', schema=None) as batch_op:
        batch_op.create_index('ix_window_states_window', ['window_start_ms'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('window_states', schema=None) as batch_op:
        batch_op.drop_index('ix_window_states_window')

    op.drop_table('window_states')
    op.drop_table('window_evaluations')
    op.drop_table('silences')
    with op.batch_alter_table('retrain_requests', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_retrain_requests_model'))

    op.drop_table('retrain_requests')
    with op.batch_alter_table('predictions', schema=None) as batch_op:
        batch_op.drop_index('ix_predictions_ts')

    op.drop_table('predictions')
    with op.batch_alter_table('notifications', schema=None) as batch_op:
        batch_op.drop_index('ix_notifications_due')
        batch_op.drop_index(batch_op.f('ix_notifications_alert_fingerprint'))

    op.drop_table('notifications')
    op.drop_table('model_versions')
    op.drop_table('model_aliases')
    with op.batch_alter_table('labels', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_labels_model'))

    op.drop_table('labels')
    with op.batch_alter_table('detector_results', schema=None) as batch_op:
        batch_op.drop_index('ix_detector_results_window')

    op.drop_table('detector_results')
    with op.batch_alter_table('dead_letters', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_dead_letters_received_at'))

    op.drop_table('dead_letters')
    op.drop_table('consumer_offsets')
    op.drop_table('baselines')
    with op.batch_alter_table('alias_events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_alias_events_model'))

    op.drop_table('alias_events')
    with op.batch_alter_table('alerts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_alerts_state'))

    op.drop_table('alerts')
